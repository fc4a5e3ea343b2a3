package shared

import (
	"errors"
	"strings"
	"testing"
)

// TestRespScan follows RESP2 and RESP3 replies fed whole and a byte at a
// time: sound ones pass (a bulk string whose bytes look like a header
// included), and a bulk above the bound, an aggregate of too many
// elements, nested or not, and an endless line are refused.
func TestRespScan(t *testing.T) {
	sound := []string{
		"+OK\r\n",
		"$5\r\nhello\r\n",
		"$-1\r\n",
		"$11\r\n$99999999\r\n\r\n", // a value that looks like a header
		"*3\r\n$7\r\nmessage\r\n$10\r\nvolfs2:set\r\n$3\r\nkey\r\n",
		">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nb\r\n",
		"%2\r\n+server\r\n+redis\r\n+proto\r\n:3\r\n",
		"*2\r\n*2\r\n:1\r\n:2\r\n*0\r\n",
		"|1\r\n+ttl\r\n:3\r\n$2\r\nhi\r\n",
		"-ERR unknown command\r\n:42\r\n_\r\n,1.5\r\n#t\r\n(123\r\n=7\r\ntxt:abc\r\n",
	}
	bad := map[string]string{
		"a terabyte":           "$1099511627776\r\n",
		"above the bound":      "$101\r\n",
		"a huge array":         "*1000000000\r\n",
		"nested arrays":        strings.Repeat("*60000\r\n", 3),
		"a negative length":    "$-2\r\n",
		"no number":            "$abc\r\n",
		"a line without end":   "+" + strings.Repeat("x", maxLine+1),
		"a line without a CR":  "+OK\n",
		"too many in a map":    "%40000\r\n",
		"a bulk after a value": "$5\r\nhello\r\n$200\r\n",
	}
	for _, whole := range []bool{true, false} {
		for _, s := range sound {
			c := &respConn{max: 100}
			if err := feed(c, s, whole); err != nil {
				t.Errorf("%q (whole %v): %v", s, whole, err)
			}
			if len(c.stack) != 0 || c.skip != 0 || len(c.line) != 0 {
				t.Errorf("%q (whole %v): left in the middle of a reply: %+v", s, whole, c)
			}
		}
		for name, s := range bad {
			c := &respConn{max: 100}
			if err := feed(c, s, whole); !errors.Is(err, errDeclared) {
				t.Errorf("%s (whole %v): %v, want it refused", name, whole, err)
			}
		}
	}
}

func feed(c *respConn, s string, whole bool) error {
	if whole {
		return c.scan([]byte(s))
	}
	for i := range len(s) {
		if err := c.scan([]byte{s[i]}); err != nil {
			return err
		}
	}
	return nil
}
