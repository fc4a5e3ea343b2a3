package fuse

import (
	"fmt"
	"testing"
)

// TestLiveFiles: the files looked up beyond the bound are queued to be
// dropped, oldest first; a file go-fuse let go leaves the LRU, unless
// another node has taken its number since.
func TestLiveFiles(t *testing.T) {
	l := newLiveFiles(3)
	nodes := make([]*fileInode, 6)
	for i := range nodes {
		nodes[i] = &fileInode{}
		l.add(uint64(i+2), liveFile{name: fmt.Sprint(i), node: nodes[i]})
	}
	var queued []string
	for _, f := range l.pending {
		queued = append(queued, f.name)
	}
	if got, want := fmt.Sprint(queued), "[0 1 2]"; got != want {
		t.Errorf("queued: got %v, want %v", got, want)
	}
	l.forget(5, &fileInode{}) // a node that lost the race for number 5
	if l.len() != 3 {
		t.Errorf("after forgetting another node: got %d files, want 3", l.len())
	}
	l.forget(5, nodes[3])
	if l.len() != 2 {
		t.Errorf("after forget: got %d files, want 2", l.len())
	}
}

// TestLiveDirectories: directories share the files' bound; a directory
// go-fuse let go leaves the LRU.
func TestLiveDirectories(t *testing.T) {
	l := newLiveFiles(2)
	d1, d2 := &dirInode{}, &dirInode{}
	l.add(2, liveFile{name: "a", node: d1})
	l.add(3, liveFile{name: "b", node: &fileInode{}})
	l.add(4, liveFile{name: "c", node: d2})
	if len(l.pending) != 1 || l.pending[0].name != "a" {
		t.Errorf("queued %v, want the directory a", l.pending)
	}
	l.forget(4, d2)
	if l.len() != 1 {
		t.Errorf("after forgetting directory c: got %d entries, want 1", l.len())
	}
}
