package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/comm-gateway/comm/channels"
)

// account is a Page as /me/accounts and GET /{page} show it.
type account struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	AccessToken string `json:"access_token"`
	IG          *struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	} `json:"instagram_business_account"`
}

// pageFields are the fields asked of a Page.
const pageFields = "id,name,access_token,instagram_business_account{id,username}"

// maxPages bounds the Pages listed at an install.
const maxPages = 500

// Install exchanges the login code for a user token, lists the person's
// Pages (with their tokens and linked Instagram accounts) and binds the
// connection to the one chosen (config page_id or ig_id), or the first.
func (a *Adapter) Install(ctx context.Context, code, redirectURL string) (channels.Provisioned, error) {
	if !a.opts.operatorApp() {
		return channels.Provisioned{}, channels.Permanent("%s: install: this gateway has no Meta app configured", a.channel)
	}
	if code == "" || len(code) > 4096 {
		return channels.Provisioned{}, &channels.ConfigError{Field: "code", Msg: a.channel + ": the login was not approved (no code)"}
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	q := url.Values{"client_id": {a.opts.AppID}, "client_secret": {a.opts.AppSecret}, "redirect_uri": {redirectURL}, "code": {code}}
	err := a.call(ctx, "install", http.MethodGet, "/oauth/access_token", "", "", q, nil, &tok)
	var ge *graphError
	if errors.As(err, &ge) && strings.Contains(strings.ToLower(err.Error()), "client secret") {
		return channels.Provisioned{}, channels.Permanent("%s: install: Meta refused the gateway's app secret (check --meta-app-secret): %v", a.channel, err)
	}
	if errors.As(err, &ge) && !errors.Is(err, channels.ErrTransient) {
		return channels.Provisioned{}, &channels.ConfigError{Field: "code", Msg: a.channel + ": Meta refused the login code: " + strings.TrimPrefix(err.Error(), a.channel+": install: ")}
	}
	if err != nil {
		return channels.Provisioned{}, err
	}
	if !tokenRE.MatchString(tok.AccessToken) {
		return channels.Provisioned{}, channels.Permanent("%s: install: the code exchange gave no user token", a.channel)
	}
	pages, err := a.listPages(ctx, tok.AccessToken)
	if err != nil {
		return channels.Provisioned{}, err
	}
	p, err := a.choose(pages)
	if err != nil {
		return channels.Provisioned{}, err
	}
	cfg := Config{App: AppOperator, PageID: p.ID, PageAccessToken: p.AccessToken, Name: p.Name, HumanAgent: a.cfg.HumanAgent}
	key, address := p.ID, p.Name
	if a.channel == Instagram {
		cfg.IGID, cfg.Name = p.IG.ID, p.IG.Username
		key, address = p.IG.ID, "@"+p.IG.Username
		if p.IG.Username == "" {
			address = p.IG.ID
		}
	}
	if address == "" {
		address = key
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return channels.Provisioned{}, fmt.Errorf("%s: install: %w", a.channel, err)
	}
	return channels.Provisioned{Config: raw, Address: address, RouteKey: key}, nil
}

// listPages reads GET /me/accounts with the user token, following pages
// of results up to maxPages.
func (a *Adapter) listPages(ctx context.Context, userToken string) ([]account, error) {
	var all []account
	q := url.Values{"fields": {pageFields}, "limit": {"100"}}
	after := ""
	for range 10 {
		if after != "" {
			q.Set("after", after)
		}
		var r struct {
			Data   []account `json:"data"`
			Paging struct {
				Cursors struct {
					After string `json:"after"`
				} `json:"cursors"`
				Next string `json:"next"`
			} `json:"paging"`
		}
		if err := a.call(ctx, "list pages", http.MethodGet, "/me/accounts", userToken, a.opts.AppSecret, q, nil, &r); err != nil {
			if errors.Is(err, channels.ErrRevoked) {
				return nil, &channels.ConfigError{Field: "code", Msg: a.channel + ": Meta refused the user token: " + err.Error()}
			}
			return nil, err
		}
		for _, p := range r.Data {
			if idRE.MatchString(p.ID) && tokenRE.MatchString(p.AccessToken) && len(all) < maxPages {
				if p.IG != nil && !idRE.MatchString(p.IG.ID) {
					p.IG = nil
				}
				all = append(all, p)
			}
		}
		if r.Paging.Next == "" || r.Paging.Cursors.After == "" || len(all) >= maxPages {
			break
		}
		after = r.Paging.Cursors.After
	}
	return all, nil
}

// choose picks the Page the connection binds to.
func (a *Adapter) choose(pages []account) (account, error) {
	var ids []string
	for _, p := range pages {
		if a.channel == Instagram {
			if p.IG == nil {
				continue
			}
			ids = append(ids, p.IG.ID)
			if a.cfg.IGID == p.IG.ID || (a.cfg.IGID == "" && (a.cfg.PageID == "" || a.cfg.PageID == p.ID)) {
				return p, nil
			}
			continue
		}
		ids = append(ids, p.ID)
		if a.cfg.PageID == "" || a.cfg.PageID == p.ID {
			return p, nil
		}
	}
	switch {
	case a.channel == Instagram && len(ids) == 0:
		return account{}, &channels.ConfigError{Field: "ig_id", Msg: "instagram: none of the Pages granted at login has a linked Instagram professional account"}
	case len(ids) == 0:
		return account{}, &channels.ConfigError{Field: "page_id", Msg: "facebook: no Page was granted at login (choose at least one Page in the Facebook dialog)"}
	case a.channel == Instagram && a.cfg.IGID != "":
		return account{}, &channels.ConfigError{Field: "ig_id", Msg: fmt.Sprintf("instagram: the account %s was not granted at login; granted: %s", a.cfg.IGID, strings.Join(ids, ", "))}
	case a.channel == Instagram:
		return account{}, &channels.ConfigError{Field: "page_id", Msg: fmt.Sprintf("instagram: the Page %s was not granted at login, or has no linked Instagram account; accounts granted: %s", a.cfg.PageID, strings.Join(ids, ", "))}
	}
	return account{}, &channels.ConfigError{Field: "page_id", Msg: fmt.Sprintf("facebook: the Page %s was not granted at login; granted: %s", a.cfg.PageID, strings.Join(ids, ", "))}
}

// Provision checks the Page token against the Page (GET /{page}), finds
// the linked Instagram account (instagram), and subscribes the app to the
// Page's messaging webhooks (POST /{page}/subscribed_apps). A connection of
// the operator's app registers its Page (or Instagram account) id as
// RouteKey.
func (a *Adapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	if a.NeedsInstall() {
		return channels.Provisioned{}, &channels.ConfigError{Field: "page_access_token", Msg: a.channel + ": the connection waits for a login with the gateway's Meta app"}
	}
	var p account
	err := a.call(ctx, "check token", http.MethodGet, "/"+a.cfg.PageID, a.cfg.PageAccessToken, a.secret(),
		url.Values{"fields": {"id,name,instagram_business_account{id,username}"}}, nil, &p)
	var ge *graphError
	switch {
	case errors.Is(err, channels.ErrRevoked):
		return channels.Provisioned{}, &channels.ConfigError{Field: "page_access_token", Msg: a.channel + ": " + strings.TrimPrefix(err.Error(), a.channel+": check token: ")}
	case errors.As(err, &ge) && strings.Contains(err.Error(), "appsecret_proof"):
		return channels.Provisioned{}, &channels.ConfigError{Field: "app_secret", Msg: a.channel + ": the app secret is not the secret of the app the Page token was made with (Meta refused its appsecret_proof)"}
	case errors.As(err, &ge) && !errors.Is(err, channels.ErrTransient):
		return channels.Provisioned{}, &channels.ConfigError{Field: "page_id", Msg: a.channel + ": Meta refused the Page: " + strings.TrimPrefix(err.Error(), a.channel+": check token: ")}
	case err != nil:
		return channels.Provisioned{}, err
	case p.ID != a.cfg.PageID:
		return channels.Provisioned{}, &channels.ConfigError{Field: "page_access_token", Msg: a.channel + ": the token is not the Page's token (it answers for " + Sanitize(p.ID) + ")"}
	}
	cfg := a.cfg
	cfg.Name = Sanitize(p.Name)
	if a.channel == Instagram {
		switch {
		case p.IG == nil || !idRE.MatchString(p.IG.ID):
			return channels.Provisioned{}, &channels.ConfigError{Field: "page_id", Msg: "instagram: the Page has no linked Instagram professional account"}
		case cfg.IGID != "" && cfg.IGID != p.IG.ID:
			return channels.Provisioned{}, &channels.ConfigError{Field: "ig_id", Msg: "instagram: the Page's linked Instagram account is " + p.IG.ID + ", not " + cfg.IGID}
		}
		cfg.IGID, cfg.Name = p.IG.ID, Sanitize(p.IG.Username)
	}
	q := url.Values{"subscribed_fields": {strings.Join(SubscribedFields, ",")}}
	if a.channel == Instagram {
		q.Set("subscribed_fields", "messages")
	}
	var ok struct {
		Success bool `json:"success"`
	}
	if err := a.call(ctx, "subscribe the app to the Page", http.MethodPost, "/"+cfg.PageID+"/subscribed_apps", cfg.PageAccessToken, a.secret(), q, nil, &ok); err != nil {
		if errors.As(err, &ge) && !errors.Is(err, channels.ErrTransient) {
			return channels.Provisioned{}, &channels.ConfigError{Field: "page_access_token", Msg: a.channel + ": Meta refused to subscribe the app to the Page (the token needs pages_manage_metadata and pages_messaging): " + err.Error()}
		}
		return channels.Provisioned{}, err
	}
	if !ok.Success {
		return channels.Provisioned{}, channels.Transient(0, "%s: subscribe the app to the Page: Meta did not confirm", a.channel)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return channels.Provisioned{}, fmt.Errorf("%s: provision: %w", a.channel, err)
	}
	res := channels.Provisioned{Config: raw, Address: cfg.Name}
	if a.channel == Instagram && cfg.Name != "" {
		res.Address = "@" + cfg.Name
	}
	if res.Address == "" {
		res.Address = cfg.PageID
		if a.channel == Instagram {
			res.Address = cfg.IGID
		}
	}
	if cfg.App == AppOperator {
		res.RouteKey = cfg.PageID
		if a.channel == Instagram {
			res.RouteKey = cfg.IGID
		}
	}
	return res, nil
}

// Deprovision unsubscribes the operator's app from a Messenger
// connection's Page (DELETE /{page}/subscribed_apps); a token Meta
// already rejects means it is gone. An Instagram connection leaves the
// Page subscribed (a Messenger connection of the same Page may need it),
// and a bring-your-own app is the caller's: nothing is undone there.
func (a *Adapter) Deprovision(ctx context.Context) error {
	if a.cfg.App != AppOperator || a.channel != Facebook || a.NeedsInstall() {
		return nil
	}
	err := a.call(ctx, "unsubscribe the app from the Page", http.MethodDelete, "/"+a.cfg.PageID+"/subscribed_apps", a.cfg.PageAccessToken, a.secret(), nil, nil, nil)
	if errors.Is(err, channels.ErrRevoked) {
		return nil
	}
	return err
}
