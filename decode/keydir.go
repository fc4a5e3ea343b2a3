package decode

// IsRoot reports whether d is its array's own directory (Array.KeyRoot).
func (d KeyDir) IsRoot() bool { return d.depth == 0 }
