package inbound

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"runtime"
	"strings"
	"testing"
)

// TestParseMemory25MB reports what parsing a 25 MB message costs. enmime
// decodes from memory, so the expected footprint is the raw message (held
// by the caller) plus the decoded parts; the report is a log line, not an
// assertion beyond a generous ceiling.
func TestParseMemory25MB(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocates about 100 MB; meaningless under the race detector")
	}
	raw := bigMessage(t, 25<<20)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	msg, err := Parse(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	peakInuse := after.HeapInuse
	runtime.GC()
	var retained runtime.MemStats
	runtime.ReadMemStats(&retained)

	const mb = 1 << 20
	attached := msg.Attachments[0].Size
	t.Logf("raw %.1f MB (attachment decodes to %.1f MB): allocated during Parse %.1f MB; heap in use before %.1f MB, right after Parse %.1f MB, after GC with msg alive %.1f MB (raw + decoded message)",
		float64(len(raw))/mb, float64(attached)/mb,
		float64(after.TotalAlloc-before.TotalAlloc)/mb,
		float64(before.HeapInuse)/mb, float64(peakInuse)/mb, float64(retained.HeapInuse)/mb)
	if got := after.TotalAlloc - before.TotalAlloc; got > 6*uint64(len(raw)) {
		t.Errorf("Parse allocated %d bytes for a %d byte message", got, len(raw))
	}
	runtime.KeepAlive(raw)
	runtime.KeepAlive(msg)
}

// bigMessage builds a message of about size bytes: a short text part and
// one base64 attachment of random bytes.
func bigMessage(t *testing.T, size int) []byte {
	t.Helper()
	payload := make([]byte, (size-4096)/4*3*76/78)
	if _, err := rand.Read(payload); err != nil {
		t.Fatal(err)
	}
	enc := base64.StdEncoding.EncodeToString(payload)
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(crlf(
		"From: big@example.com",
		"To: inbox@in.comm.test",
		"Subject: big attachment",
		"MIME-Version: 1.0",
		`Content-Type: multipart/mixed; boundary="b"`,
		"",
		"--b",
		"Content-Type: text/plain; charset=utf-8",
		"",
		"Here is the archive.",
		"--b",
		`Content-Type: application/octet-stream; name="blob.bin"`,
		`Content-Disposition: attachment; filename="blob.bin"`,
		"Content-Transfer-Encoding: base64",
		"",
	))
	for len(enc) > 76 {
		b.WriteString(enc[:76])
		b.WriteString("\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n")
	b.WriteString("--b--\r\n")
	if b.Len() > size || strings.Count(b.String()[:200], "From:") != 1 {
		t.Fatalf("built %d bytes, want at most %d", b.Len(), size)
	}
	return b.Bytes()
}
