package wacloud_test

import (
	"testing"

	"github.com/comm-gateway/comm/channels/wacloud"
	"github.com/comm-gateway/comm/channels/wacloud/wacloudtest"
)

// FuzzReceive feeds signed bodies to Receive: it never panics, and what
// it returns is complete and on a configured line.
func FuzzReceive(f *testing.F) {
	n := &wacloudtest.Number{PhoneNumberID: "106540352242922", DisplayNumber: "+15550001111"}
	f.Add(wacloudtest.Payload(wacloudtest.Value{Number: n, Messages: []wacloudtest.Message{
		{From: "16505551234", UserID: "US.1349", ID: "wamid.1", Text: "hi", Context: "wamid.0"},
		{From: "16505551234", ID: "wamid.2", Type: "location", Text: "home"},
		{From: "16505551234", ID: "wamid.3", Type: "unsupported"}},
		Statuses: []wacloudtest.Status{{ID: "wamid.9", Status: "failed", RecipientID: "16505551234", Code: 131047, Title: "Re-engagement"}}}))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"106540352242922"},"messages":[{"id":"x"}]}}]}]}`))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":{}}`))
	f.Add([]byte(`[]`))
	const secret = "fuzzsecret0123456789"
	d := wacloud.Descriptor(wacloud.Options{GraphURL: "http://127.0.0.1:1/v23.0", AppSecret: secret, VerifyToken: "v",
		Numbers: []wacloud.Number{{PhoneNumberID: n.PhoneNumberID, DisplayNumber: n.DisplayNumber, AccessToken: "EAAG0123456789abcdef"}}})
	f.Fuzz(func(t *testing.T, body []byte) {
		lis, err := d.Shared.Receive(wacloudtest.SignedRequest("https://comm.example/hooks/whatsapp", secret, body), body)
		if err != nil {
			return
		}
		for _, li := range lis {
			if li.ProviderID == "" || li.Line != n.PhoneNumberID || (li.Receipt == nil && li.Sender == "") {
				t.Fatalf("incomplete item %+v", li)
			}
		}
	})
}
