// Package metrics holds per-turn records and the one set of definitions every
// report uses:
//
//   - TTFT of a turn: from its first attempt's send to the first token of the
//     attempt that succeeded.
//   - A turn is good when it completed and its TTFT <= the SLO.
//   - goodput = good turns completed in the window / window seconds.
//   - offered = turns started in the window / window seconds.
//   - SLO % = good turns / turns that ended (completed or failed) in the window.
//   - reuse % = prompt tokens served from prefix cache / prompt tokens, over the
//     completed turns in the window (the successful attempt of each).
//   - failures = turns that failed after all attempts; rejections = attempts
//     refused by admission (router or gateway), counted for the turns that
//     ended in the window.
//   - Percentiles are over completed turns, nearest rank, and every summary
//     says how many turns it counts.
//
// A run with a cool-down (it goes on past the window so that the window's
// turns can end) measures the turns that started in the window instead of
// those that ended in it (Collector.SampleStarts); those still running when
// the run ends are counted as unfinished, apart from Turns.
//
// A Collector keeps the figures as turns end (counts, token sums, and each
// completed turn's TTFT and backend: 12 bytes), so a run that does not keep
// its records (Collector.DropRecords; the simulator without
// Config.KeepRecords) measures millions of turns in a few hundred MB; the
// summaries are the same with or without the records.
//
// Records are written as NDJSON, one JSON object per line, times in seconds.
package metrics
