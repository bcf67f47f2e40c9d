package inbound

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// replyBusy and replyBusyIP are written to a connection refused at accept
// time, before any greeting (RFC 5321 4.3.2 allows 421 as the opening
// reply).
const (
	replyBusy   = "421 4.7.0 Too many connections, try again later\r\n"
	replyBusyIP = "421 4.7.0 Too many connections from your address, try again later\r\n"
)

// limitListener bounds the connections open at once, overall and per
// client IP. A connection over a limit is answered 421 and closed without
// reaching go-smtp; the others are released when go-smtp closes them.
type limitListener struct {
	net.Listener
	max, perIP int // 0: no limit
	log        *slog.Logger
	srv        *Server // told about refusals

	mu       sync.Mutex
	open     int
	byIP     map[string]int
	refusals int // since the last log line
	lastLog  time.Time
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientIP(c.RemoteAddr())
		reply := l.acquire(ip)
		if reply == "" {
			return &limitConn{Conn: c, l: l, ip: ip}, nil
		}
		l.srv.refused("session_limit")
		// A short, bounded write: the socket buffer takes it at once.
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write([]byte(reply))
		_ = c.Close()
	}
}

// acquire counts a new connection from ip, or returns the reply refusing
// it.
func (l *limitListener) acquire(ip string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	reply := ""
	switch {
	case l.max > 0 && l.open >= l.max:
		reply = replyBusy
	case l.perIP > 0 && l.byIP[ip] >= l.perIP:
		reply = replyBusyIP
	}
	if reply != "" {
		l.refusals++
		if time.Since(l.lastLog) > 10*time.Second {
			l.log.Warn("smtp: connections refused over the session limits", "refused", l.refusals, "last_ip", ip,
				"open", l.open, "open_from_ip", l.byIP[ip], "max_sessions", l.max, "max_sessions_per_ip", l.perIP)
			l.refusals, l.lastLog = 0, time.Now()
		}
		return reply
	}
	l.open++
	l.byIP[ip]++
	return ""
}

func (l *limitListener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
}

// clientIP is the IP address of addr, or its string form when it has none.
func clientIP(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	if addr == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

// limitConn releases its place once, when it is closed (go-smtp closes
// it, or the TLS connection over it, when the session ends).
type limitConn struct {
	net.Conn
	l    *limitListener
	ip   string
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}
