// Package report holds presentation helpers for Stargate results: aligned
// plain-text and CSV tables, SVG bar and scatter charts, and self-contained
// HTML pages that combine them.
//
// The package knows nothing about the simulator's types. Callers turn their
// results into already-formatted table cells, bar values or scatter points,
// and report only lays them out. It depends on nothing but the standard
// library.
//
// All output is deterministic: the same input gives byte-identical output.
// Nothing iterates over a map or reads the clock.
//
// # Charts
//
// BarChart draws grouped bars (one group per category, one bar per series)
// with optional error bars; its y axis always includes 0. ScatterChart draws
// points per series, optionally joined by a line, on a linear or logarithmic
// y axis. Both render a fixed-size SVG (720x360 with a matching viewBox) with
// "nice" tick values (steps of 1, 2, 2.5 or 5 times a power of ten), axis
// labels, a title, a legend and the colour-blind friendly Okabe-Ito palette.
// NaN and infinite values are skipped, as are non-positive values on a
// logarithmic axis. Charts with nothing to draw get empty axes and a
// "no data" note. All text is escaped, and the output is well-formed XML.
//
// # Pages
//
// A Page is an HTML document with inline CSS and inline SVG. It loads no
// external resources and needs no JavaScript, so one file can be archived or
// mailed as it is.
package report
