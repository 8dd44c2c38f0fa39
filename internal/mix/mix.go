package mix

// Mix64 is the splitmix64 step: an increment by the golden ratio and a
// finalizer. It is a bijection, so distinct inputs never collide.
func Mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
