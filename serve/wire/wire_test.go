package wire

import "testing"

func TestCounts(t *testing.T) {
	var c Counts
	c.Accepted = 4
	c.End("", true)
	c.End("client_cancelled", true)
	c.End("overloaded", false)
	c.End("overloaded", false)
	if c.Completed != 1 || c.Failed["client_cancelled"] != 1 || c.Rejected["overloaded"] != 2 || c.Ended() != 4 {
		t.Fatalf("counts %+v, ended %d", c, c.Ended())
	}
	d := c.Clone()
	d.End("engine_lost", true)
	if c.Failed["engine_lost"] != 0 || d.Failed["engine_lost"] != 1 {
		t.Fatal("a clone shares its maps")
	}
}

func TestCopyBuffer(t *testing.T) {
	b := GetCopyBuffer()
	if len(*b) != 32<<10 {
		t.Fatalf("buffer of %d bytes", len(*b))
	}
	PutCopyBuffer(b)
}
