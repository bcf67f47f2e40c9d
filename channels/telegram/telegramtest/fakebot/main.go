// Command fakebot runs the fake Telegram Bot API of package telegramtest
// on a port of its own, with one bot, so that a gateway can be tried with
// Telegram on a machine without internet:
//
//	go run ./channels/telegram/telegramtest/fakebot --listen 127.0.0.1:8081
//	COMM_TELEGRAM_API_URL=http://127.0.0.1:8081 comm serve
//
// Besides the Bot API it answers a few control requests, as a person on
// Telegram would act:
//
//	POST /fake/say      {"from": 42, "text": "hi", "reply_to": 0}  a person writes to the bot
//	GET  /fake/sent     what the bot sent (sendMessage)
//	GET  /fake/actions  chat actions (typing)
//	GET  /fake/webhook  the webhook the bot has set
//
// Every Bot API call is logged, without the token.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"

	"github.com/comm-gateway/comm/channels/telegram/telegramtest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to serve the fake Bot API on")
	username := flag.String("username", "comm_demo_bot", "the bot's username (without @)")
	flag.Parse()
	fake := telegramtest.NewServer()
	defer fake.Close()
	bot := fake.NewBot(*username)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /fake/say", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			From    int64  `json:"from"`
			Text    string `json:"text"`
			ReplyTo int64  `json:"reply_to"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil || in.From == 0 {
			http.Error(w, `want {"from": <user id>, "text": "..."}`, http.StatusBadRequest)
			return
		}
		u := telegramtest.TextMessage(in.From, in.Text)
		if in.ReplyTo != 0 {
			u.Message.ReplyToMessage = &telegramtest.Message{MessageID: in.ReplyTo, Chat: u.Message.Chat}
		}
		u, err := bot.Incoming(r.Context(), u)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		writeJSON(w, u)
	})
	mux.HandleFunc("GET /fake/sent", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, bot.Sent()) })
	mux.HandleFunc("GET /fake/actions", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, bot.Actions()) })
	mux.HandleFunc("GET /fake/webhook", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, bot.Webhook()) })
	mux.Handle("/", fake)
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if strings.HasPrefix(path, "/bot") {
			if _, method, ok := strings.Cut(path[1:], "/"); ok {
				path = "/bot<token>/" + method
			}
		}
		log.Printf("%s %s", r.Method, path)
		mux.ServeHTTP(w, r)
	})
	fmt.Printf("fake Telegram Bot API on http://%s\nbot @%s, token %s\n", ln.Addr(), bot.Username, bot.Token)
	log.Fatal(http.Serve(ln, logged))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
