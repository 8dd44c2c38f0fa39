package sim

import "time"

// DefaultRegions are the routing study's five regions, three routers each.
func DefaultRegions() []Region {
	return []Region{{"usw2", 3}, {"ue1", 3}, {"ew1", 3}, {"an1", 3}, {"as2", 3}}
}

// defaultRTTms are round-trip times in milliseconds between us-west-2,
// us-east-1, eu-west-1, ap-northeast-1 and ap-southeast-2, rounded medians of
// public inter-region ping measurements between those cloud regions; within a
// region, 1 ms.
var defaultRTTms = [5][5]float64{
	//  usw2  ue1  ew1  an1  as2
	{1, 64, 124, 98, 140},   // usw2
	{64, 1, 68, 146, 198},   // ue1
	{124, 68, 1, 212, 254},  // ew1
	{98, 146, 212, 1, 108},  // an1
	{140, 198, 254, 108, 1}, // as2
}

// DefaultLatency is the one-way latency matrix of DefaultRegions: half of each
// round-trip time above.
func DefaultLatency() [][]time.Duration {
	m := make([][]time.Duration, len(defaultRTTms))
	for i, row := range defaultRTTms {
		m[i] = make([]time.Duration, len(row))
		for j, rtt := range row {
			m[i][j] = time.Duration(rtt / 2 * float64(time.Millisecond))
		}
	}
	return m
}
