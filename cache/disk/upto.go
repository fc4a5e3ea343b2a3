package disk

// GetUpTo is Get of an entry whose size the caller does not know: it
// returns the bytes stored for key, at most bound of them, when check
// accepts the identity stored with them. An entry larger than bound is a
// miss, deleted as Get deletes an entry of another size. It serves small
// objects of unknown size, such as the metadata and listings a tree keeps
// for an origin that cannot be reached (fetcher/keep: "Kept answers").
func (c *Cache) GetUpTo(key string, bound int64, check func(ident []byte) error) ([]byte, bool) {
	if bound < 0 {
		return nil, false
	}
	return c.get(key, -1, bound, check)
}
