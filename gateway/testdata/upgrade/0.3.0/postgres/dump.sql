

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
    last_sign_in_at timestamp with time zone,
    balance_micros bigint
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

CREATE TABLE bindings (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    project_id character varying NOT NULL,
    channel character varying NOT NULL,
    provider character varying,
    line character varying NOT NULL,
    person character varying NOT NULL,
    connection_id character varying NOT NULL,
    scope_key character varying NOT NULL
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
    status_reason character varying,
    customer_id character varying NOT NULL,
    agent_id character varying NOT NULL,
    name character varying,
    config bytea,
    address character varying,
    inbox_key character varying,
    route_key character varying,
    line character varying,
    join_code character varying,
    join_link character varying,
    join_key character varying,
    authorize_url character varying,
    oauth_state character varying,
    webhook_url character varying,
    session_owner character varying,
    session_until timestamp with time zone,
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
    amount_micros bigint,
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
    size integer,
    pos bigint,
    body text NOT NULL,
    created_at bigint NOT NULL
);

CREATE TABLE idempotency_keys (
    id character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    project_id character varying NOT NULL,
    key character varying NOT NULL,
    request_hash bytea NOT NULL,
    started_at timestamp with time zone NOT NULL,
    status bigint,
    response bytea,
    response_bytes bigint
);

CREATE TABLE leases (
    id character varying NOT NULL,
    owner character varying,
    until timestamp with time zone NOT NULL
);

CREATE TABLE line_answers (
    id character varying NOT NULL,
    line character varying NOT NULL,
    answered_at timestamp with time zone NOT NULL
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
    unbilled boolean DEFAULT false NOT NULL,
    next_attempt_at timestamp with time zone,
    sent_at timestamp with time zone,
    delivery_state character varying,
    delivery_code character varying,
    delivery_reason character varying,
    delivered_at timestamp with time zone,
    read_at timestamp with time zone
);

CREATE TABLE pending_receipts (
    id bigint NOT NULL,
    created_at timestamp with time zone NOT NULL,
    project_id character varying NOT NULL,
    connection_id character varying NOT NULL,
    provider_message_id character varying NOT NULL,
    state character varying NOT NULL,
    code character varying,
    reason character varying,
    at timestamp with time zone NOT NULL
);

ALTER TABLE pending_receipts ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME pending_receipts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
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

CREATE TABLE provider_states (
    id character varying NOT NULL,
    value bytea NOT NULL,
    updated_at timestamp with time zone NOT NULL
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

INSERT INTO accounts VALUES ('acct_01m8cwf5zemvxskmz06sbkz2rq', '2026-11-26 21:34:00.671116+00', 'local', 'operator', '', 'Local operator', '2026-11-26 21:34:00.671116+00', 100000000);

INSERT INTO api_keys VALUES ('key_01m8cwf556700fkrr6nsx85y4m', '2026-11-26 21:33:59.846344+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', '\xad7ea56f2428553e22652b430651db62fbe5b368988c1c1b14c47555978887b9', 'sandbox', 'comm_sandbox_…tpx5', NULL, '2026-11-26 21:33:59.850756+00', NULL);
INSERT INTO api_keys VALUES ('key_01m8cwf60z8zng9b3jrh16b209', '2026-11-26 21:34:00.735746+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', '\x26d116222f1e3b7020ebdf19319ded6462c8634e8a8564e761b04c2e5eb2da94', 'signed_in', 'comm_…lA0d', 'comm login', '2026-11-26 21:34:00.738137+00', NULL);

INSERT INTO connections VALUES ('conn_01m8cwf55benfwwqz0q2frheke', '2026-11-26 21:33:59.851533+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'test', '', 'active', NULL, 'cus_01m8cwf555t1jhyqnrq2b68s5f', 'agt_01m8cwf555t1jhyqnrq5bggpzn', '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO connections VALUES ('conn_01m8cwf5rf357swd1ah136p5c1', '2026-11-26 21:34:00.47871+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'email', '', 'active', NULL, 'cus_01m8cwf555t1jhyqnrq2b68s5f', 'agt_01m8cwf555t1jhyqnrq5bggpzn', '', NULL, 'inbox-cp5j22yo35@comm.localhost', 'email:inbox-cp5j22yo35@comm.localhost', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

INSERT INTO conversations VALUES ('conv_01m8cwf59xhmd0zg1kag64e2fk', '2026-11-26 21:33:59.997893+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'conn_01m8cwf55benfwwqz0q2frheke', 'ann@example.com', 'ann@example.com', NULL, NULL, '2026-11-26 21:34:00.245958+00');
INSERT INTO conversations VALUES ('conv_01m8cwf5t4htpkbfpezd0mh4s7', '2026-11-26 21:34:00.516862+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'conn_01m8cwf5rf357swd1ah136p5c1', 'upgrade-fixture-1@example.org', 'carol@example.org', 'before the upgrade', NULL, '2026-11-26 21:34:00.516862+00');
INSERT INTO conversations VALUES ('conv_01m8cwf5e509g467e2eqaey6rf', '2026-11-26 21:34:00.133751+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'conn_01m8cwf55benfwwqz0q2frheke', 'bob@example.com', 'bob@example.com', NULL, NULL, '2026-11-26 21:34:00.773906+00');

INSERT INTO credit_entries VALUES ('cred_01m8cwf608z0j2yw4fn0g9k1es', '2026-11-26 21:34:00.671116+00', 'acct_01m8cwf5zemvxskmz06sbkz2rq', 'grant', 10000, 100000000, 'grant:signup', 'Welcome credit for signing in', NULL);

INSERT INTO device_requests VALUES ('dreq_01m8cwf5vvp4t5qwhn7gdvwdz4', '2026-11-26 21:34:00.570668+00', '\x3e9817792d469756af8989dcde9196a58b9f8a7bdf621b90e61b270febe7926e', '\x9afd75934ac8f0e9da16e7a304618652a9682b87a640d8225222eb93ec7a97f4', 'consumed', 'proj_01m8cwf555t1jhyqnrq1mb4brh', '127.0.0.1', 'Go-http-client/1.1', 5, NULL, '2026-11-26 21:49:00.570668+00', 'acct_01m8cwf5zemvxskmz06sbkz2rq', 'proj_01m8cwf555t1jhyqnrq1mb4brh', '2026-11-26 21:34:00.728436+00');

INSERT INTO events VALUES ('proj_01m8cwf555t1jhyqnrq1mb4brh', 1, 'connection.active', 488, 488, '{"seq":1,"type":"connection.active","data":{"customer_id":"cus_01m8cwf555t1jhyqnrq2b68s5f","agent_id":"agt_01m8cwf555t1jhyqnrq5bggpzn","connection":{"id":"conn_01m8cwf55benfwwqz0q2frheke","channel":"test","provider":null,"status":"active","customer_id":"cus_01m8cwf555t1jhyqnrq2b68s5f","agent_id":"agt_01m8cwf555t1jhyqnrq5bggpzn","name":null,"address":null,"line":null,"join_code":null,"join_link":null,"webhook_url":null,"authorize_url":null,"created_at":"2026-11-26T21:33:59.851533Z"}}}', 1795728839852);
INSERT INTO events VALUES ('proj_01m8cwf555t1jhyqnrq1mb4brh', 2, 'message.received', 397, 885, '{"seq":2,"type":"message.received","data":{"customer_id":"cus_01m8cwf555t1jhyqnrq2b68s5f","agent_id":"agt_01m8cwf555t1jhyqnrq5bggpzn","message":{"id":"msg_01m8cwf5a6kwy1zywfcz92fys8","conversation_id":"conv_01m8cwf59xhmd0zg1kag64e2fk","connection_id":"conn_01m8cwf55benfwwqz0q2frheke","channel":"test","sender":"ann@example.com","subject":null,"text":"hello from before the upgrade","html":null}}}', 1795728840035);
INSERT INTO events VALUES ('proj_01m8cwf555t1jhyqnrq1mb4brh', 3, 'message.received', 381, 1266, '{"seq":3,"type":"message.received","data":{"customer_id":"cus_01m8cwf555t1jhyqnrq2b68s5f","agent_id":"agt_01m8cwf555t1jhyqnrq5bggpzn","message":{"id":"msg_01m8cwf5eem2sxdp4xr679v1bk","conversation_id":"conv_01m8cwf5e509g467e2eqaey6rf","connection_id":"conn_01m8cwf55benfwwqz0q2frheke","channel":"test","sender":"bob@example.com","subject":null,"text":"hi, it is bob","html":null}}}', 1795728840165);
INSERT INTO events VALUES ('proj_01m8cwf555t1jhyqnrq1mb4brh', 4, 'message.sent', 548, 1814, '{"seq":4,"type":"message.sent","data":{"customer_id":"cus_01m8cwf555t1jhyqnrq2b68s5f","agent_id":"agt_01m8cwf555t1jhyqnrq5bggpzn","message":{"id":"msg_01m8cwf5hnmtderg71v2jmzy8x","conversation_id":"conv_01m8cwf59xhmd0zg1kag64e2fk","connection_id":"conn_01m8cwf55benfwwqz0q2frheke","channel":"test","sender":"conn_01m8cwf55benfwwqz0q2frheke","subject":null,"text":"hello ann","html":null,"recipient":"ann@example.com","in_reply_to":"msg_01m8cwf5a6kwy1zywfcz92fys8","status":"sent","sent_at":"2026-11-26T21:34:00.346701Z","error":null,"attempts":1}}}', 1795728840381);
INSERT INTO events VALUES ('proj_01m8cwf555t1jhyqnrq1mb4brh', 5, 'connection.active', 517, 2331, '{"seq":5,"type":"connection.active","data":{"customer_id":"cus_01m8cwf555t1jhyqnrq2b68s5f","agent_id":"agt_01m8cwf555t1jhyqnrq5bggpzn","connection":{"id":"conn_01m8cwf5rf357swd1ah136p5c1","channel":"email","provider":null,"status":"active","customer_id":"cus_01m8cwf555t1jhyqnrq2b68s5f","agent_id":"agt_01m8cwf555t1jhyqnrq5bggpzn","name":null,"address":"inbox-cp5j22yo35@comm.localhost","line":null,"join_code":null,"join_link":null,"webhook_url":null,"authorize_url":null,"created_at":"2026-11-26T21:34:00.47871Z"}}}', 1795728840494);
INSERT INTO events VALUES ('proj_01m8cwf555t1jhyqnrq1mb4brh', 6, 'message.received', 676, 3007, '{"seq":6,"type":"message.received","data":{"customer_id":"cus_01m8cwf555t1jhyqnrq2b68s5f","agent_id":"agt_01m8cwf555t1jhyqnrq5bggpzn","message":{"id":"msg_01m8cwf5t5ngf652552d0wadfp","conversation_id":"conv_01m8cwf5t4htpkbfpezd0mh4s7","connection_id":"conn_01m8cwf5rf357swd1ah136p5c1","channel":"email","sender":"carol@example.org","subject":"before the upgrade","text":"A mail to the inbox.","html":null,"details":{"message_id":"upgrade-fixture-1@example.org","from_name":"Carol","to":["inbox-cp5j22yo35@comm.localhost"],"mail_from":"carol@example.org","auth":{"spf":"none","spf_domain":"example.org","dkim":"none","dkim_signatures":null,"dmarc":"none","dmarc_policy":""}}}}}', 1795728840517);
INSERT INTO events VALUES ('proj_01m8cwf555t1jhyqnrq1mb4brh', 7, 'message.received', 382, 3389, '{"seq":7,"type":"message.received","data":{"customer_id":"cus_01m8cwf555t1jhyqnrq2b68s5f","agent_id":"agt_01m8cwf555t1jhyqnrq5bggpzn","message":{"id":"msg_01m8cwf6274wtam7dj3efv0syb","conversation_id":"conv_01m8cwf5e509g467e2eqaey6rf","connection_id":"conn_01m8cwf55benfwwqz0q2frheke","channel":"test","sender":"bob@example.com","subject":null,"text":"are you there?","html":null}}}', 1795728840777);

INSERT INTO idempotency_keys VALUES ('idk_01m8cwf57jehjda0x4f88dmvk7', '2026-11-26 21:33:59.913823+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'upgrade-fixture-inbound-1', '\xd2200e6adc55b33b24ca859c11838206f2c7b10f713c1d65b96635ff3c94a7ce', '2026-11-26 21:33:59.913823+00', 201, '\x019fbbc5edf5331ce4e35a143e64092adfb5af4ed8fae8cdd179f322de08315b8dcc97bf8f8af79671c9ab7801a3bbd9c3a50adaf999d07fabbb781c014b8eacc93f4abf5d2a0d99b5c52c928cd87e958d53a76b4b3197b227dda1acd4d1a9811762acff6ee8e48b5670c92d6a76fe485b932c3e7c2c2d04f561b143eef674fb5bd9fcf787faf9e88d363c0edde37ee83da9fd796986877a52f2f8efd30f67b6ac9577580c5c83aa8b7326569c2a11b651103a2056a6e0d0d0179a531e61c456d61daee5551dbfce5dbeb72ce9fc83192940ecfd32b5419bea68c41ffc2a4285a0d76d1c76affb818df88ea1cc9c725816f09d4f0345e3beeac142c221016eced4f72067b5f193e36135e7fddaa9d9199f76e4438be5ad6d4b89c1f11ddff1c0d9f861bc7c6f5339dcef58b276ccfefab6294a7991264e4d2437ee4a77fffa8feaa60fe193c22c15a8c818020cea8baaca921d4bb5060f10e8b9b6e1605da618ca2e76cb8e98e5baddf61fc086289a5197b7ef33eba335f109fd7b56019e8f1072263521855c6122ea570c8baed4d18da8c05a866734104bf6e6394dbc9ef2cbed3fda2ac221df2b47c5327e4f2d185acdb9dcbb869978262bc4a7e0b3b542d5094446233bc2b0d9d4bb53d6d5e7db1a08c5748be043fa1b4e6dc6e427daf4be485cfbfd89b8f9ed45719cb490b591c643560681576ff01f45ae55e002cc94422cdde1c54c9e6c2fb0a55ed6ffc3b6d8289b3d57a5af4456b2a9768e6485aed2795417a949b4baa1cafd4031aaee77c5669ff3fbfc2a0113b162209c2c1ef9d6e6d690d66dd80d0b3011686d1181ff658c0d0adaecb8f906bd345f3f68be402df6a01468b215f99c1c999923db2ca6cf2f12e2c0893db948e260f2600e2ed3b86f4457e924d1f2421a9e56314a1c51f36b073942eedf42', 430);

INSERT INTO messages VALUES ('msg_01m8cwf5a6kwy1zywfcz92fys8', '2026-11-26 21:33:59.997893+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'conv_01m8cwf59xhmd0zg1kag64e2fk', 'conn_01m8cwf55benfwwqz0q2frheke', 'test', 'inbound', 'received', 'inj_01m8cwf59p2xmhq753fq6ey79c', 'ann@example.com', '', NULL, 'hello from before the upgrade', NULL, NULL, NULL, NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cwf5eem2sxdp4xr679v1bk', '2026-11-26 21:34:00.133751+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'conv_01m8cwf5e509g467e2eqaey6rf', 'conn_01m8cwf55benfwwqz0q2frheke', 'test', 'inbound', 'received', 'inj_01m8cwf5ces65ktc5bjwcx091n', 'bob@example.com', '', NULL, 'hi, it is bob', NULL, NULL, NULL, NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cwf5hnmtderg71v2jmzy8x', '2026-11-26 21:34:00.245958+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'conv_01m8cwf59xhmd0zg1kag64e2fk', 'conn_01m8cwf55benfwwqz0q2frheke', 'test', 'outbound', 'sent', 'test_01m8cwf5hnmtderg71v2jmzy8x', 'conn_01m8cwf55benfwwqz0q2frheke', 'ann@example.com', NULL, 'hello ann', NULL, 'msg_01m8cwf5a6kwy1zywfcz92fys8', '["inj_01m8cwf59p2xmhq753fq6ey79c"]', NULL, NULL, NULL, 1, false, NULL, '2026-11-26 21:34:00.346701+00', NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cwf5t5ngf652552d0wadfp', '2026-11-26 21:34:00.516862+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'conv_01m8cwf5t4htpkbfpezd0mh4s7', 'conn_01m8cwf5rf357swd1ah136p5c1', 'email', 'inbound', 'received', 'upgrade-fixture-1@example.org', 'carol@example.org', 'inbox-cp5j22yo35@comm.localhost', 'before the upgrade', 'A mail to the inbox.', NULL, NULL, NULL, NULL, '{"to": ["inbox-cp5j22yo35@comm.localhost"], "auth": {"spf": "none", "dkim": "none", "dmarc": "none", "spf_domain": "example.org", "dmarc_policy": "", "dkim_signatures": null}, "from_name": "Carol", "mail_from": "carol@example.org", "message_id": "upgrade-fixture-1@example.org"}', NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cwf6274wtam7dj3efv0syb', '2026-11-26 21:34:00.773906+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'conv_01m8cwf5e509g467e2eqaey6rf', 'conn_01m8cwf55benfwwqz0q2frheke', 'test', 'inbound', 'received', 'inj_01m8cwf617npkmgf1ywp544ea8', 'bob@example.com', '', NULL, 'are you there?', NULL, NULL, NULL, NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

INSERT INTO projects VALUES ('proj_01m8cwf555t1jhyqnrq1mb4brh', '2026-11-26 21:33:59.845862+00', 'upgrade', 'cus_01m8cwf555t1jhyqnrq2b68s5f', 'agt_01m8cwf555t1jhyqnrq5bggpzn', 7, 'acct_01m8cwf5zemvxskmz06sbkz2rq');

INSERT INTO provider_states VALUES ('gateway/encryption-key-check', '\xba0a89076046376298208dd31a7c1009a40c1846321a2b4be5fecd885675abcb', '2026-11-26 21:33:59.796627+00');

INSERT INTO web_sessions VALUES ('wses_01m8cwf60fq6m2vdtpwffd26ah', '2026-11-26 21:34:00.719795+00', '\x8f9dd64747faf4073660b18c471d79df9b3da1835cdcd266728b810bba6903e1', 'acct_01m8cwf5zemvxskmz06sbkz2rq', '2026-11-27 09:34:00+00', NULL);

INSERT INTO webhook_attempts VALUES ('wha_01m8cwf5ddccwjxmmy3s1s3343', '2026-11-26 21:34:00.109989+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'whk_01m8cwf56axstapnmd1gtf74cs', 'http://127.0.0.1:37639/hook', 2, 204, 5, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cwf5g6ksx6kme482ew2fca', '2026-11-26 21:34:00.198188+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'whk_01m8cwf56axstapnmd1gtf74cs', 'http://127.0.0.1:37639/hook', 3, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cwf5rf357swd1ah06g2dp3', '2026-11-26 21:34:00.463173+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'whk_01m8cwf56axstapnmd1gtf74cs', 'http://127.0.0.1:37639/hook', 4, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cwf5srgx76vm7n4b3knw0d', '2026-11-26 21:34:00.504009+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'whk_01m8cwf56axstapnmd1gtf74cs', 'http://127.0.0.1:37639/hook', 5, 204, 4, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cwf5vkf96eh2c2g3pw2xjs', '2026-11-26 21:34:00.563214+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'whk_01m8cwf56axstapnmd1gtf74cs', 'http://127.0.0.1:37639/hook', 6, 204, 3, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cwf62cy0ky977cmtrg7s06', '2026-11-26 21:34:00.780668+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'whk_01m8cwf56axstapnmd1gtf74cs', 'http://127.0.0.1:37639/hook', 7, 0, 0, 'connection refused', false);

INSERT INTO webhooks VALUES ('whk_01m8cwf56axstapnmd1gtf74cs', '2026-11-26 21:33:59.882025+00', 'proj_01m8cwf555t1jhyqnrq1mb4brh', 'http://127.0.0.1:37639/hook', '\x010ed5ae8fe4773cd8c03162acb64618863758c93ffde7a05ff12fd012df70b1df2a748a5729cc1372cf3398ecfeb63d699fccc36c6de9eddd3d9a7874417121b29585829300b93aea1d3a', 'failing', 6, 'connection refused', '2026-11-26 21:34:00.779949+00', 1, '2026-11-26 21:34:01.920366+00', NULL, NULL, NULL, '2026-11-26 21:34:00.837299+00');

SELECT pg_catalog.setval('pending_receipts_id_seq', 1, false);

ALTER TABLE ONLY accounts
    ADD CONSTRAINT accounts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

ALTER TABLE ONLY attachments
    ADD CONSTRAINT attachments_pkey PRIMARY KEY (id);

ALTER TABLE ONLY bindings
    ADD CONSTRAINT bindings_pkey PRIMARY KEY (id);

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

ALTER TABLE ONLY idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (id);

ALTER TABLE ONLY leases
    ADD CONSTRAINT leases_pkey PRIMARY KEY (id);

ALTER TABLE ONLY line_answers
    ADD CONSTRAINT line_answers_pkey PRIMARY KEY (id);

ALTER TABLE ONLY messages
    ADD CONSTRAINT messages_pkey PRIMARY KEY (id);

ALTER TABLE ONLY pending_receipts
    ADD CONSTRAINT pending_receipts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY projects
    ADD CONSTRAINT projects_pkey PRIMARY KEY (id);

ALTER TABLE ONLY provider_states
    ADD CONSTRAINT provider_states_pkey PRIMARY KEY (id);

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

CREATE INDEX binding_project_id ON bindings USING btree (project_id);

CREATE INDEX binding_project_id_connection_id_id ON bindings USING btree (project_id, connection_id, id);

CREATE INDEX binding_project_id_connection_id_person ON bindings USING btree (project_id, connection_id, person);

CREATE UNIQUE INDEX bindings_scope_key_key ON bindings USING btree (scope_key);

CREATE INDEX connection_address ON connections USING btree (address);

CREATE INDEX connection_line ON connections USING btree (line);

CREATE INDEX connection_project_id ON connections USING btree (project_id);

CREATE UNIQUE INDEX connections_inbox_key_key ON connections USING btree (inbox_key);

CREATE UNIQUE INDEX connections_join_key_key ON connections USING btree (join_key);

CREATE UNIQUE INDEX connections_oauth_state_key ON connections USING btree (oauth_state);

CREATE UNIQUE INDEX connections_route_key_key ON connections USING btree (route_key);

CREATE INDEX conversation_project_id ON conversations USING btree (project_id);

CREATE UNIQUE INDEX conversation_project_id_connection_id_thread_key ON conversations USING btree (project_id, connection_id, thread_key);

CREATE INDEX conversation_project_id_last_message_at ON conversations USING btree (project_id, last_message_at);

CREATE UNIQUE INDEX creditentry_account_id_key ON credit_entries USING btree (account_id, key);

CREATE UNIQUE INDEX device_requests_device_hash_key ON device_requests USING btree (device_hash);

CREATE UNIQUE INDEX device_requests_user_hash_key ON device_requests USING btree (user_hash);

CREATE INDEX devicerequest_expires_at ON device_requests USING btree (expires_at);

CREATE INDEX domain_project_id ON domains USING btree (project_id);

CREATE UNIQUE INDEX domain_project_id_domain ON domains USING btree (project_id, domain);

CREATE INDEX domain_status_checked_at ON domains USING btree (status, checked_at);

CREATE INDEX events_project_type ON events USING btree (project_id, type, seq);

CREATE INDEX idempotencykey_created_at ON idempotency_keys USING btree (created_at);

CREATE INDEX idempotencykey_project_id ON idempotency_keys USING btree (project_id);

CREATE UNIQUE INDEX idempotencykey_project_id_key ON idempotency_keys USING btree (project_id, key);

CREATE INDEX lineanswer_answered_at ON line_answers USING btree (answered_at);

CREATE INDEX lineanswer_line_answered_at ON line_answers USING btree (line, answered_at);

CREATE INDEX message_conversation_id ON messages USING btree (conversation_id);

CREATE INDEX message_conversation_in_flight ON messages USING btree (conversation_id, id) WHERE ((status)::text = ANY ((ARRAY['queued'::character varying, 'sending'::character varying])::text[]));

CREATE INDEX message_in_flight ON messages USING btree (project_id, connection_id) WHERE ((status)::text = ANY ((ARRAY['queued'::character varying, 'sending'::character varying])::text[]));

CREATE INDEX message_project_id ON messages USING btree (project_id);

CREATE UNIQUE INDEX message_project_id_connection_id_provider_message_id ON messages USING btree (project_id, connection_id, provider_message_id);

CREATE INDEX message_status_next_attempt_at ON messages USING btree (status, next_attempt_at);

CREATE INDEX pendingreceipt_project_id ON pending_receipts USING btree (project_id);

CREATE INDEX pendingreceipt_project_id_connection_id_created_at ON pending_receipts USING btree (project_id, connection_id, created_at);

CREATE INDEX pendingreceipt_project_id_connection_id_provider_message_id ON pending_receipts USING btree (project_id, connection_id, provider_message_id);

CREATE UNIQUE INDEX web_sessions_token_hash_key ON web_sessions USING btree (token_hash);

CREATE INDEX webhook_project_id ON webhooks USING btree (project_id);

CREATE INDEX webhookattempt_project_id ON webhook_attempts USING btree (project_id);

CREATE INDEX webhookattempt_webhook_id ON webhook_attempts USING btree (webhook_id);

CREATE UNIQUE INDEX webhooks_one_per_project ON webhooks USING btree (project_id);

CREATE INDEX websession_account_id ON web_sessions USING btree (account_id);

CREATE INDEX websession_expires_at ON web_sessions USING btree (expires_at);

