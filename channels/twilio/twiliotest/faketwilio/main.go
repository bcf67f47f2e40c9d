// Command faketwilio runs the fake Twilio of package twiliotest on a port
// of its own, with one account and one number, so that a gateway can be
// tried with SMS and WhatsApp through Twilio on a machine without
// internet:
//
//	go run ./channels/twilio/twiliotest/faketwilio --listen 127.0.0.1:8082
//	COMM_TWILIO_API_URL=http://127.0.0.1:8082 COMM_TWILIO_MESSAGING_URL=http://127.0.0.1:8082 comm serve
//
// Besides the REST API it answers a few control requests, as a person
// texting the number (and Twilio reporting on messages) would act:
//
//	POST /fake/say     {"from": "+15557654321", "text": "hi", "whatsapp": false}  a person writes (signed webhook to the number's SmsUrl)
//	POST /fake/status  {"sid": "SM...", "status": "delivered", "error_code": 0}   a status callback for a sent message
//	GET  /fake/sent    what the account sent (Messages.json)
//	GET  /fake/typing  typing indicators
//	GET  /fake/number  the number, with the SmsUrl comm set
//
// Every API call is logged, without credentials.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"

	"github.com/comm-gateway/comm/channels/twilio/twiliotest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8082", "address to serve the fake Twilio API on")
	number := flag.String("number", "+15550001111", "the account's phone number (E.164)")
	flag.Parse()
	fake := twiliotest.NewServer()
	defer fake.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fake.URL = "http://" + ln.Addr().String()
	acct := fake.NewAccount()
	acct.AddNumber(*number)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /fake/say", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			From     string `json:"from"`
			Text     string `json:"text"`
			WhatsApp bool   `json:"whatsapp"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil || in.From == "" {
			http.Error(w, `want {"from": "+1...", "text": "..."}`, http.StatusBadRequest)
			return
		}
		p, status, body, err := acct.Send(r.Context(), twiliotest.Incoming{From: in.From, To: *number, Body: in.Text, WhatsApp: in.WhatsApp})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		writeJSON(w, map[string]any{"message_sid": p.Get("MessageSid"), "status": status, "answer": string(body)})
	})
	mux.HandleFunc("POST /fake/status", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			SID       string `json:"sid"`
			Status    string `json:"status"`
			ErrorCode int    `json:"error_code"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil || in.SID == "" || in.Status == "" {
			http.Error(w, `want {"sid": "SM...", "status": "delivered"}`, http.StatusBadRequest)
			return
		}
		status, body, err := acct.Status(r.Context(), in.SID, in.Status, in.ErrorCode)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		writeJSON(w, map[string]any{"status": status, "answer": string(body)})
	})
	mux.HandleFunc("GET /fake/sent", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, acct.Sent()) })
	mux.HandleFunc("GET /fake/typing", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, acct.Typings()) })
	mux.HandleFunc("GET /fake/number", func(w http.ResponseWriter, r *http.Request) {
		n, _ := acct.Number(*number)
		writeJSON(w, n)
	})
	mux.Handle("/", fake)
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Printf("%s %s", r.Method, r.URL.Path)
		mux.ServeHTTP(w, r)
	})
	fmt.Printf("fake Twilio on %s\naccount_sid %s\nauth_token %s\nnumber %s\n", fake.URL, acct.SID, acct.AuthToken, *number)
	log.Fatal(http.Serve(ln, logged))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
