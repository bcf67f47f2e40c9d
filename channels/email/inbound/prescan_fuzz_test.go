package inbound

import (
	"bytes"
	"testing"

	"github.com/jhillyerd/enmime/v2"
)

// enmimeParts counts the parts under p as enmime built them.
func enmimeParts(p *enmime.Part) int {
	n := 0
	for c := p.FirstChild; c != nil; c = c.NextSibling {
		n += 1 + enmimeParts(c)
	}
	return n
}

// FuzzPrescanCounts: whatever the input, the pre-scan never lets through a
// message in which enmime finds more parts than the limit.
func FuzzPrescanCounts(f *testing.F) {
	for _, seed := range []string{plainMsg, multipartMsg, latin1B64Msg, string(nested(3)), string(emptyParts(5)),
		"Content-Type: multipart/mixed; boundary*0=\"a\"; boundary*1=\"b\"\r\n\r\n--ab\r\n\r\nx\r\n--ab\r\n\r\n--ab--\r\n",
		"Content-Type: multipart/mixed; =?us-ascii?q?boundary=3Dq?=\r\n\r\n--q\r\n\r\n--q\r\n\r\n--q--\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 64<<10 {
			return
		}
		root, err := parser.ReadParts(bytes.NewReader(raw))
		if err != nil {
			return
		}
		n := enmimeParts(root)
		if n == 0 {
			return
		}
		if err := prescan(bytes.NewReader(raw), scanLimits{maxParts: n - 1, maxDepth: 1000, maxBase64Errors: 1 << 30, maxHeaderBytes: 1 << 30, maxFieldBytes: 1 << 30}); err == nil {
			t.Fatalf("enmime reads %d parts; the pre-scan passed a limit of %d", n, n-1)
		}
	})
}
