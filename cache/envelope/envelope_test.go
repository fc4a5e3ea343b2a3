package envelope

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestSealOpen seals values signed and not, in both forms, opens them,
// and refuses each change that matters: another key (also one that only
// moves bytes between the key and the identity, which a MAC that does not
// bind the key's length would accept), another size, another keeper's
// magic, another secret, a cut.
func TestSealOpen(t *testing.T) {
	data := bytes.Repeat([]byte("voxel"), 1000)
	for _, secret := range [][]byte{nil, []byte("s3cret")} {
		form, payload := Compress(data)
		if form != FormZstd {
			t.Fatalf("form %d for a repetitive chunk, want zstd", form)
		}
		env := Seal("VTST", secret, "key", []byte("id"), form, payload)
		ident, p, f, err := Open("VTST", secret, "key", int64(len(data)), env)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(f, p, int64(len(data)))
		if err != nil || !bytes.Equal(got, data) || string(ident) != "id" {
			t.Fatalf("opened %d bytes, %q, %v", len(got), ident, err)
		}
		if _, err := Decode(f, p, int64(len(data))-1); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decoded at a smaller size: %v", err)
		}

		// "key"+"id" sealed as "ke"+"yid": the same bytes after the
		// header, another split.
		damaged := bytes.Clone(env)
		damaged[len(damaged)-1] ^= 0x10
		moved := bytes.Clone(env)
		binary.LittleEndian.PutUint32(moved[16:], 2)
		binary.LittleEndian.PutUint32(moved[20:], 3)
		for name, tc := range map[string]struct {
			magic, key string
			size       int64
			secret     []byte
			raw        []byte
			want       error
		}{
			"another key":      {"VTST", "kez", int64(len(data)), secret, env, ErrCorrupt},
			"key length moved": {"VTST", "ke", int64(len(data)), secret, moved, nil},
			"another keeper":   {"VOTH", "key", int64(len(data)), secret, env, ErrCorrupt},
			"cut":              {"VTST", "key", int64(len(data)), secret, env[:len(env)-1], ErrCorrupt},
			"another secret":   {"VTST", "key", int64(len(data)), []byte("other"), env, ErrSignature},
			// Damage is told apart from another secret, signed or not.
			"damaged": {"VTST", "key", int64(len(data)), secret, damaged, ErrCorrupt},
		} {
			_, _, _, err := Open(tc.magic, tc.secret, tc.key, tc.size, tc.raw)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("secret %q, %s: %v, want %v", secret, name, err, tc.want)
			}
		}
	}
	// Signed with a secret, read without one, and the other way round.
	signed := Seal("VTST", []byte("s"), "k", nil, FormStored, []byte("x"))
	if _, _, _, err := Open("VTST", nil, "k", 1, signed); !errors.Is(err, ErrSignature) {
		t.Errorf("signed value opened without a secret: %v", err)
	}
	plain := Seal("VTST", nil, "k", nil, FormStored, []byte("x"))
	if _, _, _, err := Open("VTST", []byte("s"), "k", 1, plain); !errors.Is(err, ErrSignature) {
		t.Errorf("unsigned value opened with a secret: %v", err)
	}
}

// TestMaxLen: every envelope Seal makes for a payload of size fits
// MaxLen, the bound readers refuse above before reading.
func TestMaxLen(t *testing.T) {
	ident := make([]byte, MaxIdent)
	for _, n := range []int{0, 1, 300, 1 << 20} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i * 7919 >> 3)
		}
		for _, form := range []byte{FormStored, FormZstd} {
			payload := data
			if form == FormZstd {
				payload = encoder.EncodeAll(data, nil)
			}
			if got := int64(len(Seal("VTST", nil, "key", ident, form, payload))); got > MaxLen("key", int64(n)) {
				t.Errorf("%d bytes, form %d: envelope of %d bytes, above MaxLen %d", n, form, got, MaxLen("key", int64(n)))
			}
		}
	}
}
