

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

CREATE TABLE accounts (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    issuer character varying NOT NULL,
    subject character varying NOT NULL,
    email character varying,
    name character varying,
    last_sign_in_at timestamp with time zone
);

CREATE TABLE api_keys (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    project_id character varying NOT NULL,
    hash bytea NOT NULL,
    kind character varying NOT NULL,
    display character varying NOT NULL,
    name character varying,
    last_used_at timestamp with time zone,
    revoked_at timestamp with time zone
);

CREATE TABLE attachments (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    project_id character varying NOT NULL,
    message_id character varying NOT NULL,
    filename character varying,
    content_type character varying NOT NULL,
    content_id character varying,
    inline boolean DEFAULT false NOT NULL,
    size bigint NOT NULL,
    data bytea NOT NULL,
    blob_id character varying
);

CREATE TABLE blobs (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    size bigint NOT NULL,
    data bytea NOT NULL
);

CREATE TABLE connections (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    project_id character varying NOT NULL,
    channel character varying NOT NULL,
    provider character varying,
    status character varying DEFAULT 'pending'::character varying NOT NULL,
    customer_id character varying NOT NULL,
    agent_id character varying NOT NULL,
    name character varying,
    config bytea,
    address character varying,
    inbox_key character varying,
    deleted_at timestamp with time zone
);

CREATE TABLE conversations (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    project_id character varying NOT NULL,
    connection_id character varying NOT NULL,
    thread_key character varying NOT NULL,
    participant character varying,
    subject character varying,
    typing_until timestamp with time zone,
    last_message_at timestamp with time zone NOT NULL
);

CREATE TABLE credit_entries (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    account_id character varying NOT NULL,
    kind character varying NOT NULL,
    amount_cents bigint NOT NULL,
    key character varying NOT NULL,
    description character varying NOT NULL,
    project_id_ref character varying
);

CREATE TABLE device_requests (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    device_hash bytea NOT NULL,
    user_hash bytea NOT NULL,
    status character varying DEFAULT 'pending'::character varying NOT NULL,
    sandbox_project_id character varying,
    client_ip character varying,
    user_agent character varying,
    "interval" bigint NOT NULL,
    last_poll_at timestamp with time zone,
    expires_at timestamp with time zone NOT NULL,
    account_id character varying,
    project_id_result character varying,
    decided_at timestamp with time zone
);

CREATE TABLE domains (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    project_id character varying NOT NULL,
    domain character varying NOT NULL,
    inbound_domain character varying,
    status character varying DEFAULT 'pending'::character varying NOT NULL,
    plan jsonb NOT NULL,
    checks jsonb,
    last_error character varying,
    dkim_key bytea NOT NULL,
    checked_at timestamp with time zone,
    verified_at timestamp with time zone,
    ownership_missing_since timestamp with time zone
);

CREATE TABLE events (
    project_id text NOT NULL,
    seq bigint NOT NULL,
    type text NOT NULL,
    body text NOT NULL,
    created_at bigint NOT NULL
);

CREATE TABLE messages (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    project_id character varying NOT NULL,
    conversation_id character varying NOT NULL,
    connection_id character varying NOT NULL,
    channel character varying NOT NULL,
    direction character varying NOT NULL,
    status character varying NOT NULL,
    provider_message_id character varying,
    sender character varying NOT NULL,
    recipient character varying,
    subject character varying,
    text text NOT NULL,
    html text,
    in_reply_to character varying,
    "references" jsonb,
    attachments jsonb,
    details jsonb,
    error character varying,
    attempts bigint DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone,
    sent_at timestamp with time zone
);

CREATE TABLE projects (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    name character varying NOT NULL,
    customer_id character varying NOT NULL,
    agent_id character varying NOT NULL,
    last_seq bigint DEFAULT 0 NOT NULL,
    account_id character varying
);

CREATE TABLE web_sessions (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    token_hash bytea NOT NULL,
    account_id character varying NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    revoked_at timestamp with time zone
);

CREATE TABLE webhook_attempts (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    project_id character varying NOT NULL,
    webhook_id character varying NOT NULL,
    url character varying NOT NULL,
    seq bigint NOT NULL,
    status_code bigint,
    latency_ms bigint NOT NULL,
    error character varying,
    ok boolean NOT NULL
);

CREATE TABLE webhooks (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    project_id character varying NOT NULL,
    url character varying NOT NULL,
    secret bytea NOT NULL,
    status character varying DEFAULT 'active'::character varying NOT NULL,
    cursor bigint DEFAULT 0 NOT NULL,
    last_error character varying,
    failing_since timestamp with time zone,
    failures bigint DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone,
    lease_owner character varying,
    lease_until timestamp with time zone,
    disabled_reason character varying,
    updated_at timestamp with time zone NOT NULL
);

INSERT INTO accounts VALUES ('acct_01m8cws4azycfg4ccx4tgqhb7s', '2026-11-26 21:39:26.686567+00', 'local', 'operator', '', 'Local operator', '2026-11-26 21:39:26.686567+00');

INSERT INTO api_keys VALUES ('key_01m8cws46x5b94k0np6m8kpt90', '2026-11-26 21:39:26.557238+00', 'proj_01m8cws46vzsjre4kr739tjvc2', '\x04745d84c0f052aefd4c988dcfd5c398479094c5f73247be86e5da076a31e1a1', 'sandbox', 'comm_sandbox_…zkKo', NULL, '2026-11-26 21:39:26.560486+00', NULL);
INSERT INTO api_keys VALUES ('key_01m8cws4bg8e6m62zy11c6gqws', '2026-11-26 21:39:26.704281+00', 'proj_01m8cws46vzsjre4kr739tjvc2', '\x9dfaca1f7eb986bfee4ae6b453b96eecdca8210b5d4ddd426ffe68b0ccd01c1e', 'signed_in', 'comm_…1AN8', 'comm login', '2026-11-26 21:39:26.707424+00', NULL);

INSERT INTO connections VALUES ('conn_01m8cws472k6hp21j9t0gbjq9a', '2026-11-26 21:39:26.562213+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'test', '', 'active', 'cus_01m8cws46vzsjre4kr74mgpnqy', 'agt_01m8cws46vzsjre4kr77sgy1bm', '', NULL, NULL, NULL, NULL);
INSERT INTO connections VALUES ('conn_01m8cws4a88bzzkpek8hrqrq00', '2026-11-26 21:39:26.664369+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'email', '', 'active', 'cus_01m8cws46vzsjre4kr74mgpnqy', 'agt_01m8cws46vzsjre4kr77sgy1bm', '', NULL, 'inbox-6kwdcpynym@comm.localhost', 'email:inbox-6kwdcpynym@comm.localhost', NULL);

INSERT INTO conversations VALUES ('conv_01m8cws47mr6m2s4b8p2bbc3cb', '2026-11-26 21:39:26.580704+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'conn_01m8cws472k6hp21j9t0gbjq9a', 'ann@example.com', 'ann@example.com', NULL, NULL, '2026-11-26 21:39:26.602269+00');
INSERT INTO conversations VALUES ('conv_01m8cws4af1xt8fqm581p7pjv3', '2026-11-26 21:39:26.671028+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'conn_01m8cws4a88bzzkpek8hrqrq00', 'upgrade-fixture-1@example.org', 'carol@example.org', 'before the upgrade', NULL, '2026-11-26 21:39:26.671028+00');
INSERT INTO conversations VALUES ('conv_01m8cws485zdzyk7cgsgababwf', '2026-11-26 21:39:26.597808+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'conn_01m8cws472k6hp21j9t0gbjq9a', 'bob@example.com', 'bob@example.com', NULL, NULL, '2026-11-26 21:39:26.717343+00');

INSERT INTO credit_entries VALUES ('cred_01m8cws4b04kckgbpp9m70s9ff', '2026-11-26 21:39:26.686567+00', 'acct_01m8cws4azycfg4ccx4tgqhb7s', 'grant', 10000, 'grant:signup', 'Welcome credit for signing in', NULL);

INSERT INTO device_requests VALUES ('dreq_01m8cws4anr6vjks4q0nph3v2f', '2026-11-26 21:39:26.677091+00', '\x1e5220c4ad829eb0c7403cf321db98f80b0359cdeeb049092788e0a3633ac349', '\xd311313aa35b22785bf5dbf14c8c6f15a47d5d16610304e62e953ea25558d7cf', 'consumed', 'proj_01m8cws46vzsjre4kr739tjvc2', '127.0.0.1', 'Go-http-client/1.1', 5, NULL, '2026-11-26 21:54:26.677091+00', 'acct_01m8cws4azycfg4ccx4tgqhb7s', 'proj_01m8cws46vzsjre4kr739tjvc2', '2026-11-26 21:39:26.698976+00');

INSERT INTO events VALUES ('proj_01m8cws46vzsjre4kr739tjvc2', 1, 'connection.active', '{"seq":1,"type":"connection.active","data":{"customer_id":"cus_01m8cws46vzsjre4kr74mgpnqy","agent_id":"agt_01m8cws46vzsjre4kr77sgy1bm","connection":{"id":"conn_01m8cws472k6hp21j9t0gbjq9a","channel":"test","provider":null,"status":"active","customer_id":"cus_01m8cws46vzsjre4kr74mgpnqy","agent_id":"agt_01m8cws46vzsjre4kr77sgy1bm","name":null,"address":null,"created_at":"2026-11-26T21:39:26.562213Z"}}}', 1795729166569);
INSERT INTO events VALUES ('proj_01m8cws46vzsjre4kr739tjvc2', 2, 'message.received', '{"seq":2,"type":"message.received","data":{"customer_id":"cus_01m8cws46vzsjre4kr74mgpnqy","agent_id":"agt_01m8cws46vzsjre4kr77sgy1bm","message":{"id":"msg_01m8cws47nwq511f783nac5pcs","conversation_id":"conv_01m8cws47mr6m2s4b8p2bbc3cb","connection_id":"conn_01m8cws472k6hp21j9t0gbjq9a","channel":"test","sender":"ann@example.com","subject":null,"text":"hello from before the upgrade","html":null}}}', 1795729166584);
INSERT INTO events VALUES ('proj_01m8cws46vzsjre4kr739tjvc2', 3, 'message.received', '{"seq":3,"type":"message.received","data":{"customer_id":"cus_01m8cws46vzsjre4kr74mgpnqy","agent_id":"agt_01m8cws46vzsjre4kr77sgy1bm","message":{"id":"msg_01m8cws47wdd2b40rbw0ds52ap","conversation_id":"conv_01m8cws47mr6m2s4b8p2bbc3cb","connection_id":"conn_01m8cws472k6hp21j9t0gbjq9a","channel":"test","sender":"ann@example.com","subject":null,"text":"hello from before the upgrade","html":null}}}', 1795729166590);
INSERT INTO events VALUES ('proj_01m8cws46vzsjre4kr739tjvc2', 4, 'message.received', '{"seq":4,"type":"message.received","data":{"customer_id":"cus_01m8cws46vzsjre4kr74mgpnqy","agent_id":"agt_01m8cws46vzsjre4kr77sgy1bm","message":{"id":"msg_01m8cws486cgnea0aq63w73ddh","conversation_id":"conv_01m8cws485zdzyk7cgsgababwf","connection_id":"conn_01m8cws472k6hp21j9t0gbjq9a","channel":"test","sender":"bob@example.com","subject":null,"text":"hi, it is bob","html":null}}}', 1795729166599);
INSERT INTO events VALUES ('proj_01m8cws46vzsjre4kr739tjvc2', 5, 'message.sent', '{"seq":5,"type":"message.sent","data":{"customer_id":"cus_01m8cws46vzsjre4kr74mgpnqy","agent_id":"agt_01m8cws46vzsjre4kr77sgy1bm","message":{"id":"msg_01m8cws48b9ws9a36fx3hftqqx","conversation_id":"conv_01m8cws47mr6m2s4b8p2bbc3cb","connection_id":"conn_01m8cws472k6hp21j9t0gbjq9a","channel":"test","sender":"conn_01m8cws472k6hp21j9t0gbjq9a","subject":null,"text":"hello ann","html":null,"recipient":"ann@example.com","in_reply_to":"msg_01m8cws47nwq511f783nac5pcs","status":"sent","sent_at":"2026-11-26T21:39:26.61445Z","error":null,"attempts":1}}}', 1795729166615);
INSERT INTO events VALUES ('proj_01m8cws46vzsjre4kr739tjvc2', 6, 'connection.active', '{"seq":6,"type":"connection.active","data":{"customer_id":"cus_01m8cws46vzsjre4kr74mgpnqy","agent_id":"agt_01m8cws46vzsjre4kr77sgy1bm","connection":{"id":"conn_01m8cws4a88bzzkpek8hrqrq00","channel":"email","provider":null,"status":"active","customer_id":"cus_01m8cws46vzsjre4kr74mgpnqy","agent_id":"agt_01m8cws46vzsjre4kr77sgy1bm","name":null,"address":"inbox-6kwdcpynym@comm.localhost","created_at":"2026-11-26T21:39:26.664369Z"}}}', 1795729166665);
INSERT INTO events VALUES ('proj_01m8cws46vzsjre4kr739tjvc2', 7, 'message.received', '{"seq":7,"type":"message.received","data":{"customer_id":"cus_01m8cws46vzsjre4kr74mgpnqy","agent_id":"agt_01m8cws46vzsjre4kr77sgy1bm","message":{"id":"msg_01m8cws4af1xt8fqm585hwnz1b","conversation_id":"conv_01m8cws4af1xt8fqm581p7pjv3","connection_id":"conn_01m8cws4a88bzzkpek8hrqrq00","channel":"email","sender":"carol@example.org","subject":"before the upgrade","text":"A mail to the inbox.","html":null,"details":{"message_id":"upgrade-fixture-1@example.org","from_name":"Carol","to":["inbox-6kwdcpynym@comm.localhost"],"mail_from":"carol@example.org","auth":{"spf":"none","spf_domain":"example.org","dkim":"none","dkim_signatures":null,"dmarc":"none","dmarc_policy":""}}}}}', 1795729166672);
INSERT INTO events VALUES ('proj_01m8cws46vzsjre4kr739tjvc2', 8, 'message.received', '{"seq":8,"type":"message.received","data":{"customer_id":"cus_01m8cws46vzsjre4kr74mgpnqy","agent_id":"agt_01m8cws46vzsjre4kr77sgy1bm","message":{"id":"msg_01m8cws4bxfwgffqn2m1fz05xv","conversation_id":"conv_01m8cws485zdzyk7cgsgababwf","connection_id":"conn_01m8cws472k6hp21j9t0gbjq9a","channel":"test","sender":"bob@example.com","subject":null,"text":"are you there?","html":null}}}', 1795729166718);

INSERT INTO messages VALUES ('msg_01m8cws47nwq511f783nac5pcs', '2026-11-26 21:39:26.580704+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'conv_01m8cws47mr6m2s4b8p2bbc3cb', 'conn_01m8cws472k6hp21j9t0gbjq9a', 'test', 'inbound', 'received', 'inj_01m8cws47h27b9k8cwtrxavm53', 'ann@example.com', '', NULL, 'hello from before the upgrade', NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cws47wdd2b40rbw0ds52ap', '2026-11-26 21:39:26.587675+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'conv_01m8cws47mr6m2s4b8p2bbc3cb', 'conn_01m8cws472k6hp21j9t0gbjq9a', 'test', 'inbound', 'received', 'inj_01m8cws47vf0f9kxaq6aj99vb1', 'ann@example.com', '', NULL, 'hello from before the upgrade', NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cws486cgnea0aq63w73ddh', '2026-11-26 21:39:26.597808+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'conv_01m8cws485zdzyk7cgsgababwf', 'conn_01m8cws472k6hp21j9t0gbjq9a', 'test', 'inbound', 'received', 'inj_01m8cws4806q6rnten616eas2j', 'bob@example.com', '', NULL, 'hi, it is bob', NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cws48b9ws9a36fx3hftqqx', '2026-11-26 21:39:26.602269+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'conv_01m8cws47mr6m2s4b8p2bbc3cb', 'conn_01m8cws472k6hp21j9t0gbjq9a', 'test', 'outbound', 'sent', 'test_01m8cws48p4z39mj1bjgdtqqdc', 'conn_01m8cws472k6hp21j9t0gbjq9a', 'ann@example.com', NULL, 'hello ann', NULL, 'msg_01m8cws47nwq511f783nac5pcs', '["inj_01m8cws47h27b9k8cwtrxavm53"]', NULL, NULL, NULL, 1, NULL, '2026-11-26 21:39:26.61445+00');
INSERT INTO messages VALUES ('msg_01m8cws4af1xt8fqm585hwnz1b', '2026-11-26 21:39:26.671028+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'conv_01m8cws4af1xt8fqm581p7pjv3', 'conn_01m8cws4a88bzzkpek8hrqrq00', 'email', 'inbound', 'received', 'upgrade-fixture-1@example.org', 'carol@example.org', 'inbox-6kwdcpynym@comm.localhost', 'before the upgrade', 'A mail to the inbox.', NULL, NULL, NULL, NULL, '{"to": ["inbox-6kwdcpynym@comm.localhost"], "auth": {"spf": "none", "dkim": "none", "dmarc": "none", "spf_domain": "example.org", "dmarc_policy": "", "dkim_signatures": null}, "from_name": "Carol", "mail_from": "carol@example.org", "message_id": "upgrade-fixture-1@example.org"}', NULL, 0, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cws4bxfwgffqn2m1fz05xv', '2026-11-26 21:39:26.717343+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'conv_01m8cws485zdzyk7cgsgababwf', 'conn_01m8cws472k6hp21j9t0gbjq9a', 'test', 'inbound', 'received', 'inj_01m8cws4bxfwgffqn2kwd6f5p2', 'bob@example.com', '', NULL, 'are you there?', NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL);

INSERT INTO projects VALUES ('proj_01m8cws46vzsjre4kr739tjvc2', '2026-11-26 21:39:26.556412+00', 'upgrade', 'cus_01m8cws46vzsjre4kr74mgpnqy', 'agt_01m8cws46vzsjre4kr77sgy1bm', 8, 'acct_01m8cws4azycfg4ccx4tgqhb7s');

INSERT INTO web_sessions VALUES ('wses_01m8cws4b1thjvz4bxhttwgbca', '2026-11-26 21:39:26.689868+00', '\xa6dd9f8a2235404f21c67c577392f6dfd9e9e9e6fe1947010f2346715245c0fd', 'acct_01m8cws4azycfg4ccx4tgqhb7s', '2026-11-27 09:39:26+00', NULL);

INSERT INTO webhook_attempts VALUES ('wha_01m8cws4806q6rnten5z6fmv31', '2026-11-26 21:39:26.59205+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'whk_01m8cws47ds5y8btw6xawk0z13', 'http://127.0.0.1:43421/hook', 2, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws488j0mxemey59kqy2r8', '2026-11-26 21:39:26.60086+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'whk_01m8cws47ds5y8btw6xawk0z13', 'http://127.0.0.1:43421/hook', 3, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws48e3k0m27e5b7feg4p0', '2026-11-26 21:39:26.606016+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'whk_01m8cws47ds5y8btw6xawk0z13', 'http://127.0.0.1:43421/hook', 4, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws48yp2y5nwygy8n9a1se', '2026-11-26 21:39:26.622087+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'whk_01m8cws47ds5y8btw6xawk0z13', 'http://127.0.0.1:43421/hook', 5, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws4ae2h6qyta499ny283v', '2026-11-26 21:39:26.670145+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'whk_01m8cws47ds5y8btw6xawk0z13', 'http://127.0.0.1:43421/hook', 6, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws4akcmfdy2bcssqm94ah', '2026-11-26 21:39:26.675915+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'whk_01m8cws47ds5y8btw6xawk0z13', 'http://127.0.0.1:43421/hook', 7, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws4c10vk6p4edqfx1ygmk', '2026-11-26 21:39:26.721143+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'whk_01m8cws47ds5y8btw6xawk0z13', 'http://127.0.0.1:43421/hook', 8, 0, 0, 'connection refused', false);

INSERT INTO webhooks VALUES ('whk_01m8cws47ds5y8btw6xawk0z13', '2026-11-26 21:39:26.57333+00', 'proj_01m8cws46vzsjre4kr739tjvc2', 'http://127.0.0.1:43421/hook', '\x01e54d2c89753693012f5274d49392b1e24156dd26656382fc7dad73b6c5e0c3f67347d7b13a79a25e0b0019e7508ed372cc1f9666913059a313083b8e40491f7c8510421c8e6685e23fb7', 'failing', 7, 'connection refused', '2026-11-26 21:39:26.720538+00', 1, '2026-11-26 21:39:27.662823+00', NULL, NULL, NULL, '2026-11-26 21:39:26.778274+00');

ALTER TABLE ONLY accounts
    ADD CONSTRAINT accounts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

ALTER TABLE ONLY attachments
    ADD CONSTRAINT attachments_pkey PRIMARY KEY (id);

ALTER TABLE ONLY blobs
    ADD CONSTRAINT blobs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY connections
    ADD CONSTRAINT connections_pkey PRIMARY KEY (id);

ALTER TABLE ONLY conversations
    ADD CONSTRAINT conversations_pkey PRIMARY KEY (id);

ALTER TABLE ONLY credit_entries
    ADD CONSTRAINT credit_entries_pkey PRIMARY KEY (id);

ALTER TABLE ONLY device_requests
    ADD CONSTRAINT device_requests_pkey PRIMARY KEY (id);

ALTER TABLE ONLY domains
    ADD CONSTRAINT domains_pkey PRIMARY KEY (id);

ALTER TABLE ONLY events
    ADD CONSTRAINT events_pkey PRIMARY KEY (project_id, seq);

ALTER TABLE ONLY messages
    ADD CONSTRAINT messages_pkey PRIMARY KEY (id);

ALTER TABLE ONLY projects
    ADD CONSTRAINT projects_pkey PRIMARY KEY (id);

ALTER TABLE ONLY web_sessions
    ADD CONSTRAINT web_sessions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY webhook_attempts
    ADD CONSTRAINT webhook_attempts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY webhooks
    ADD CONSTRAINT webhooks_pkey PRIMARY KEY (id);

CREATE UNIQUE INDEX account_issuer_subject ON accounts USING btree (issuer, subject);

CREATE UNIQUE INDEX api_keys_hash_key ON api_keys USING btree (hash);

CREATE UNIQUE INDEX apikey_hash ON api_keys USING btree (hash);

CREATE INDEX apikey_project_id ON api_keys USING btree (project_id);

CREATE INDEX attachment_blob_id ON attachments USING btree (blob_id);

CREATE INDEX attachment_message_id ON attachments USING btree (message_id);

CREATE INDEX attachment_project_id ON attachments USING btree (project_id);

CREATE INDEX connection_address ON connections USING btree (address);

CREATE INDEX connection_project_id ON connections USING btree (project_id);

CREATE UNIQUE INDEX connections_inbox_key_key ON connections USING btree (inbox_key);

CREATE INDEX conversation_project_id ON conversations USING btree (project_id);

CREATE UNIQUE INDEX conversation_project_id_connection_id_thread_key ON conversations USING btree (project_id, connection_id, thread_key);

CREATE UNIQUE INDEX creditentry_account_id_key ON credit_entries USING btree (account_id, key);

CREATE UNIQUE INDEX device_requests_device_hash_key ON device_requests USING btree (device_hash);

CREATE UNIQUE INDEX device_requests_user_hash_key ON device_requests USING btree (user_hash);

CREATE INDEX devicerequest_expires_at ON device_requests USING btree (expires_at);

CREATE INDEX domain_project_id ON domains USING btree (project_id);

CREATE UNIQUE INDEX domain_project_id_domain ON domains USING btree (project_id, domain);

CREATE INDEX domain_status_checked_at ON domains USING btree (status, checked_at);

CREATE INDEX events_project_type ON events USING btree (project_id, type, seq);

CREATE INDEX message_conversation_id ON messages USING btree (conversation_id);

CREATE INDEX message_project_id ON messages USING btree (project_id);

CREATE UNIQUE INDEX message_project_id_connection_id_provider_message_id ON messages USING btree (project_id, connection_id, provider_message_id);

CREATE INDEX message_status_next_attempt_at ON messages USING btree (status, next_attempt_at);

CREATE UNIQUE INDEX web_sessions_token_hash_key ON web_sessions USING btree (token_hash);

CREATE INDEX webhook_project_id ON webhooks USING btree (project_id);

CREATE INDEX webhookattempt_project_id ON webhook_attempts USING btree (project_id);

CREATE INDEX webhookattempt_webhook_id ON webhook_attempts USING btree (webhook_id);

CREATE UNIQUE INDEX webhooks_one_per_project ON webhooks USING btree (project_id);

CREATE INDEX websession_account_id ON web_sessions USING btree (account_id);

CREATE INDEX websession_expires_at ON web_sessions USING btree (expires_at);

