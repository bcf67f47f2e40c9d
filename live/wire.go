package live

import (
	"encoding/binary"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// The live endpoint writes its websocket frames itself (gorilla/websocket
// reads them): a frame is built once, header included, and shared by the
// sockets of every subscriber that frames an event alike; a socket with
// nothing queued writes it at once, from the goroutine delivering it,
// without waiting (writeNow); otherwise its writer goroutine does (flush).
// Frames from a server are never masked (RFC 6455, 5.1). gorilla writes
// one frame itself: the close frame it answers a peer's protocol error or
// too large a message with, just before the read fails and the socket is
// closed; such a peer may see it inside a frame being written.

// headerRoom is the room a frame buffer keeps before its payload for the
// longest header.
const headerRoom = 10

// newFrame returns a buffer for a text frame whose payload is appended to
// it; sealFrame turns it into the frame.
func newFrame(capacity int) []byte { return make([]byte, headerRoom, headerRoom+capacity) }

// sealFrame writes the header of a final text frame in front of the
// payload appended to b (made by newFrame) and returns the frame.
func sealFrame(b []byte) []byte {
	n := len(b) - headerRoom
	switch {
	case n < 126:
		b[8], b[9] = 0x80|websocket.TextMessage, byte(n)
		return b[8:]
	case n <= 0xffff:
		b[6], b[7] = 0x80|websocket.TextMessage, 126
		binary.BigEndian.PutUint16(b[8:], uint16(n))
		return b[6:]
	default:
		b[0], b[1] = 0x80|websocket.TextMessage, 127
		binary.BigEndian.PutUint64(b[2:], uint64(n))
		return b
	}
}

// textFrame is the text frame of payload.
func textFrame(payload []byte) []byte { return sealFrame(append(newFrame(len(payload)), payload...)) }

// controlFrame is a ping, pong or close frame; payload is at most 125
// bytes (longer is cut).
func controlFrame(op int, payload []byte) []byte {
	payload = payload[:min(len(payload), 125)]
	return append([]byte{0x80 | byte(op), byte(len(payload))}, payload...)
}

// writeNow writes b if the socket takes it without waiting, from the
// caller's goroutine. Called with c.mu held, nothing queued and no writer
// running. It returns how many bytes went out: len(b); fewer, and held
// true: the rest must be written next, and the caller holds c.wmu for
// it (flush releases it); or 0 (the socket's buffer is full, another write
// holds the socket, or the write failed: the writer goroutine tries again
// and handles the error).
func (c *conn) writeNow(b []byte) (n int, held bool) {
	if c.rc == nil {
		return 0, false
	}
	if !c.wmu.TryLock() {
		return 0, false
	}
	if c.wclosed.Load() {
		c.wmu.Unlock()
		return 0, false
	}
	c.raw.b = b
	err := c.rc.Write(c.raw.fn)
	n, werr := c.raw.n, c.raw.err
	c.raw = rawWrite{fn: c.raw.fn}
	if err != nil || werr != nil || n <= 0 {
		c.wmu.Unlock()
		return 0, false
	}
	if n < len(b) {
		return n, true
	}
	c.wmu.Unlock()
	return n, false
}

// rawWrite is writeNow's one write(2), made once per socket (a closure
// per write would be an allocation per delivery).
type rawWrite struct {
	fn  func(fd uintptr) bool // c.writeRaw
	b   []byte
	n   int
	err error
}

// writeRaw is rawWrite.fn: it never waits.
func (c *conn) writeRaw(fd uintptr) bool {
	c.raw.n, c.raw.err = syscall.Write(int(fd), c.raw.b)
	return true
}

// writeClose writes a close frame, waiting at most a second for a frame
// being written to finish; nothing is written after it. Without the lock
// in time (a write stuck on a peer that does not read), it writes nothing:
// the socket is closed without the frame.
func (c *conn) writeClose(code int, text string) {
	for deadline := time.Now().Add(time.Second); !c.wmu.TryLock(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return
		}
	}
	defer c.wmu.Unlock()
	if c.wclosed.Swap(true) {
		return
	}
	c.nc.SetWriteDeadline(time.Now().Add(time.Second)) //nolint:errcheck // the write fails then
	c.nc.Write(controlFrame(websocket.CloseMessage, websocket.FormatCloseMessage(code, closeText(text))))
}

// closeText cuts a close frame's reason to the 123 bytes that fit beside
// its code, at a character's start (the reason must stay valid UTF-8).
func closeText(text string) string {
	if len(text) <= 123 {
		return text
	}
	n := 123
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n]
}
