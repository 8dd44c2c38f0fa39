package report

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Table is a titled grid of already-formatted cells. Rows may be shorter or
// longer than Headers; missing cells are written as empty.
type Table struct {
	Title   string
	Headers []string
	Rows    [][]string
}

// columns returns the number of columns: the longest of Headers and Rows.
func (t Table) columns() int {
	n := len(t.Headers)
	for _, r := range t.Rows {
		n = max(n, len(r))
	}
	return n
}

// pad returns row extended with empty cells to n cells.
func pad(row []string, n int) []string {
	if len(row) >= n {
		return row
	}
	out := make([]string, n)
	copy(out, row)
	return out
}

// numericColumns reports for each column whether it holds numbers: at least
// one body cell is numeric and every non-empty body cell is.
func (t Table) numericColumns(n int) []bool {
	num := make([]bool, n)
	for c := range n {
		seen, all := false, true
		for _, r := range t.Rows {
			if c >= len(r) || strings.TrimSpace(r[c]) == "" {
				continue
			}
			if isNumeric(r[c]) {
				seen = true
			} else {
				all = false
			}
		}
		num[c] = seen && all
	}
	return num
}

// isNumeric reports whether a cell holds a number: it parses as a float after
// trimming surrounding spaces and one trailing '%' or 's' (as in "12.5%" or
// "0.25s").
func isNumeric(cell string) bool {
	s := strings.TrimSpace(cell)
	if t, ok := strings.CutSuffix(s, "%"); ok {
		s = t
	} else {
		s = strings.TrimSuffix(s, "s")
	}
	if s == "" {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// WriteText writes t as an aligned plain-text table: the title on its own line
// when non-empty, then the headers, a line of dashes and the rows. Columns are
// separated by two spaces. Numeric cells (those that parse as a float after
// trimming one trailing '%' or 's') are right-aligned and other cells
// left-aligned; a header is right-aligned when its column is numeric (at least
// one numeric cell and no non-empty non-numeric one). Trailing spaces are
// trimmed.
func (t Table) WriteText(w io.Writer) error {
	var b strings.Builder
	if t.Title != "" {
		b.WriteString(t.Title)
		b.WriteByte('\n')
	}
	n := t.columns()
	width := make([]int, n)
	for i, h := range t.Headers {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	numCol := t.numericColumns(n)
	line := func(cells []string, right func(i int, c string) bool) {
		var l strings.Builder
		for i, c := range pad(cells, n) {
			if i > 0 {
				l.WriteString("  ")
			}
			gap := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if right(i, c) {
				l.WriteString(gap + c)
			} else {
				l.WriteString(c + gap)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	if len(t.Headers) > 0 {
		line(t.Headers, func(i int, _ string) bool { return numCol[i] })
		dashes := make([]string, n)
		for i := range dashes {
			dashes[i] = strings.Repeat("-", width[i])
		}
		line(dashes, func(int, string) bool { return false })
	}
	for _, r := range t.Rows {
		line(r, func(_ int, c string) bool { return isNumeric(c) })
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCSV writes the headers (when there are any) and then the rows with
// encoding/csv. Every record is padded to the same number of fields. The
// title is not written.
func (t Table) WriteCSV(w io.Writer) error {
	n := t.columns()
	cw := csv.NewWriter(w)
	if len(t.Headers) > 0 {
		if err := cw.Write(pad(t.Headers, n)); err != nil {
			return err
		}
	}
	for _, r := range t.Rows {
		if err := cw.Write(pad(r, n)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteMarkdown writes t as a GitHub-flavoured Markdown table: the headers
// (empty ones when there are none, as Markdown needs a header row), a
// delimiter row that right-aligns numeric columns, and the rows. A '|' in a
// cell is escaped and a line break becomes a space. The title is not written.
func (t Table) WriteMarkdown(w io.Writer) error {
	n := t.columns()
	if n == 0 {
		return nil
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteByte('|')
		for _, c := range pad(cells, n) {
			c = strings.NewReplacer("|", `\|`, "\r\n", " ", "\n", " ", "\r", " ").Replace(c)
			b.WriteString(" " + c + " |")
		}
		b.WriteByte('\n')
	}
	line(t.Headers)
	b.WriteByte('|')
	for _, num := range t.numericColumns(n) {
		if num {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteByte('\n')
	for _, r := range t.Rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
