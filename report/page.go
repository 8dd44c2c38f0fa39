package report

import (
	"io"
	"strings"
)

// Page is a self-contained HTML document: inline CSS and inline SVG, no
// external resources and no JavaScript. Build it with NewPage and the
// section methods, which append in order, then Write it.
type Page struct {
	Title    string
	sections []string // rendered HTML fragments
}

// NewPage returns an empty page with the given title.
func NewPage(title string) *Page { return &Page{Title: title} }

// Heading appends a section heading.
func (p *Page) Heading(text string) {
	p.sections = append(p.sections, "<h2>"+esc(text)+"</h2>\n")
}

// Paragraph appends a paragraph of plain text, which is escaped.
func (p *Page) Paragraph(text string) {
	p.sections = append(p.sections, "<p>"+esc(text)+"</p>\n")
}

// Table appends t as an HTML table with its title as caption. Numeric cells
// are right-aligned, as in Table.WriteText.
func (p *Page) Table(t Table) {
	var b strings.Builder
	n := t.columns()
	numCol := t.numericColumns(n)
	cell := func(tag, text string, right bool) {
		if right {
			b.WriteString("<" + tag + ` class="num">` + esc(text) + "</" + tag + ">")
		} else {
			b.WriteString("<" + tag + ">" + esc(text) + "</" + tag + ">")
		}
	}
	b.WriteString("<table>\n")
	if t.Title != "" {
		b.WriteString("<caption>" + esc(t.Title) + "</caption>\n")
	}
	if len(t.Headers) > 0 {
		b.WriteString("<thead><tr>")
		for i, h := range pad(t.Headers, n) {
			cell("th", h, numCol[i])
		}
		b.WriteString("</tr></thead>\n")
	}
	b.WriteString("<tbody>\n")
	for _, r := range t.Rows {
		b.WriteString("<tr>")
		for _, c := range pad(r, n) {
			cell("td", c, isNumeric(c))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
	p.sections = append(p.sections, b.String())
}

// Chart appends an inline SVG chart, such as the output of BarChart.SVG or
// ScatterChart.SVG. The markup is inserted as it is, so it must be trusted.
func (p *Page) Chart(svg string) {
	p.sections = append(p.sections, "<figure>\n"+strings.TrimRight(svg, "\n")+"\n</figure>\n")
}

// pageCSS is the page's inline style sheet.
const pageCSS = `body { font-family: sans-serif; color: #222222; margin: 2em auto; max-width: 960px; padding: 0 1em; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.5em; }
h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #dddddd; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
caption { text-align: left; font-weight: bold; padding-bottom: 0.3em; }
th, td { padding: 0.25em 0.7em; border-bottom: 1px solid #e5e5e5; text-align: left; }
th { border-bottom: 2px solid #999999; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) { background: #f7f7f7; }
figure { margin: 1em 0; }
svg { max-width: 100%; height: auto; }
`

// Write writes the whole HTML document to w.
func (p *Page) Write(w io.Writer) error {
	var b strings.Builder
	title := esc(p.Title)
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<title>" + title + "</title>\n<style>\n" + pageCSS + "</style>\n</head>\n<body>\n")
	if p.Title != "" {
		b.WriteString("<h1>" + title + "</h1>\n")
	}
	for _, s := range p.sections {
		b.WriteString(s)
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
