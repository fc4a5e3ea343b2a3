package fuse

import (
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// TestGenerationsNeverRepeat: a file moved on answers a later generation
// while a node of an earlier one lives; once they are all forgotten it is
// looked up at generation 0 again, and moving that node on must answer a
// generation no node still open has (a node of generation 1 may be): the
// kernel's retry of a stale open would otherwise land on that node, whose
// pages are of another version. Before, a move answered n's generation
// plus one: 1 again.
func TestGenerationsNeverRepeat(t *testing.T) {
	var g generations
	const ino = 7
	a, b, c := new(fileInode), new(fileInode), new(fileInode)
	if got := g.of(ino); got != 0 {
		t.Fatalf("a file never moved: generation %d, want 0", got)
	}
	g.move(gofs.StableAttr{Ino: ino}, a)
	g.move(gofs.StableAttr{Ino: ino}, a) // a second stale open of a
	if got := g.of(ino); got != 1 {
		t.Fatalf("moved once: generation %d, want 1", got)
	}
	if !g.moved(gofs.StableAttr{Ino: ino}) || g.moved(gofs.StableAttr{Ino: ino, Gen: 1}) {
		t.Error("moved: want true for generation 0, false for 1")
	}
	// b, of generation 1, stays open; a is forgotten.
	g.forget(ino, a)
	if got := g.of(ino); got != 0 {
		t.Fatalf("every older node forgotten: generation %d, want 0", got)
	}
	g.move(gofs.StableAttr{Ino: ino}, c) // c: the new node of generation 0
	if got := g.of(ino); got == 0 || got == 1 {
		t.Errorf("c moved on while b (generation 1) lives: generation %d, want one never handed out", got)
	}
	g.forget(ino, b) // not an older node: no effect
	if got := g.of(ino); got < 2 {
		t.Errorf("after b was forgotten: generation %d, want the one c moved to", got)
	}
	g.forget(ino, c)
	if len(g.m) != 0 {
		t.Errorf("every older node forgotten: %d files kept, want none", len(g.m))
	}
}
