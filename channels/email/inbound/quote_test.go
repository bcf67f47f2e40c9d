package inbound

import "testing"

func TestStripQuoted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"no history", "Hello\nthere\n", "Hello\nthere"},
		{"gmail one line", "Yes.\n\nOn Mon, Jan 2, 2006 at 3:04 PM Ann <a@x> wrote:\n> Are you in?\n", "Yes."},
		{"gmail wrapped attribution", "Yes.\r\n\r\nOn Mon, Jan 2, 2006 at 3:04 PM Ann Example <\r\nann@example.com> wrote:\r\n\r\n> Are you in?\r\n", "Yes."},
		{"interleaved", "> question one\nanswer one\n> question two\nanswer two", "answer one\nanswer two"},
		{"outlook separator", "Done.\n\n-----Original Message-----\nFrom: Ann\nSent: Monday\n\nold text", "Done."},
		{"outlook rule", "Done.\n\n________________________________\nFrom: Ann <a@x>\nSent: Monday\nold text", "Done."},
		{"on without quote kept", "On Monday I wrote: the plan.\nThen more.", "On Monday I wrote: the plan.\nThen more."},
		{"only quoted keeps all", "> all quoted\n> here", "> all quoted\n> here"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := StripQuoted(tt.in); got != tt.want {
				t.Errorf("StripQuoted(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
