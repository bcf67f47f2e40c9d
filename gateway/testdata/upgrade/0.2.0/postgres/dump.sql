

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

INSERT INTO accounts VALUES ('acct_01m8cws1gtm5z03y32rqpzeqx3', '2026-11-26 21:39:23.802238+00', 'local', 'operator', '', 'Local operator', '2026-11-26 21:39:23.802238+00', 100000000);

INSERT INTO api_keys VALUES ('key_01m8cws1cwbb7ktdce8gfzmwc6', '2026-11-26 21:39:23.676876+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', '\x7fe2b1e161f5adf2ce9d216db22b30bd503387fb54e9d392d632ac6f89b663c4', 'sandbox', 'comm_sandbox_…myID', NULL, '2026-11-26 21:39:23.681207+00', NULL);
INSERT INTO api_keys VALUES ('key_01m8cws1h8vnaeqt85ftqerjxa', '2026-11-26 21:39:23.816386+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', '\xba93d95c3d87cf1ce08c5874ef64b3d3faf1376dc91e27dc685a844995ef69c9', 'signed_in', 'comm_…pGNV', 'comm login', '2026-11-26 21:39:23.817372+00', NULL);

INSERT INTO connections VALUES ('conn_01m8cws1d3pr1c3pfw6wfg4q65', '2026-11-26 21:39:23.683422+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'test', '', 'active', NULL, 'cus_01m8cws1cwbb7ktdce8dyy3b3y', 'agt_01m8cws1cwbb7ktdce8g5nwbaa', '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO connections VALUES ('conn_01m8cws1fwkfkkmwwq0rfprrnv', '2026-11-26 21:39:23.773264+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'email', '', 'active', NULL, 'cus_01m8cws1cwbb7ktdce8dyy3b3y', 'agt_01m8cws1cwbb7ktdce8g5nwbaa', '', NULL, 'inbox-orq3cwpycj@comm.localhost', 'email:inbox-orq3cwpycj@comm.localhost', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

INSERT INTO conversations VALUES ('conv_01m8cws1dbgk9m1dzj6w9d1hgb', '2026-11-26 21:39:23.691345+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'conn_01m8cws1d3pr1c3pfw6wfg4q65', 'ann@example.com', 'ann@example.com', NULL, NULL, '2026-11-26 21:39:23.706888+00');
INSERT INTO conversations VALUES ('conv_01m8cws1g7xh9kbsmbp5dqpf6t', '2026-11-26 21:39:23.783628+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'conn_01m8cws1fwkfkkmwwq0rfprrnv', 'upgrade-fixture-1@example.org', 'carol@example.org', 'before the upgrade', NULL, '2026-11-26 21:39:23.783628+00');
INSERT INTO conversations VALUES ('conv_01m8cws1dkv1gr661gz46xzfmp', '2026-11-26 21:39:23.699049+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'conn_01m8cws1d3pr1c3pfw6wfg4q65', 'bob@example.com', 'bob@example.com', NULL, NULL, '2026-11-26 21:39:23.822743+00');

INSERT INTO credit_entries VALUES ('cred_01m8cws1gv89td59kj1rv2w145', '2026-11-26 21:39:23.802238+00', 'acct_01m8cws1gtm5z03y32rqpzeqx3', 'grant', 10000, 100000000, 'grant:signup', 'Welcome credit for signing in', NULL);

INSERT INTO device_requests VALUES ('dreq_01m8cws1gkkwtna8br08ypf5vy', '2026-11-26 21:39:23.795849+00', '\xe167a8cba16025ca26aa10ea06f65751a9076c5e0296cc407f40260e8a2d471e', '\xf320b30ff9f06c097f91f7d20fa679f5c406d42952bcdf46869b3d2a6e34ac5e', 'consumed', 'proj_01m8cws1cvan670x1d2pgfeeqg', '127.0.0.1', 'Go-http-client/1.1', 5, NULL, '2026-11-26 21:54:23.795849+00', 'acct_01m8cws1gtm5z03y32rqpzeqx3', 'proj_01m8cws1cvan670x1d2pgfeeqg', '2026-11-26 21:39:23.814656+00');

INSERT INTO events VALUES ('proj_01m8cws1cvan670x1d2pgfeeqg', 1, 'connection.active', 488, 488, '{"seq":1,"type":"connection.active","data":{"customer_id":"cus_01m8cws1cwbb7ktdce8dyy3b3y","agent_id":"agt_01m8cws1cwbb7ktdce8g5nwbaa","connection":{"id":"conn_01m8cws1d3pr1c3pfw6wfg4q65","channel":"test","provider":null,"status":"active","customer_id":"cus_01m8cws1cwbb7ktdce8dyy3b3y","agent_id":"agt_01m8cws1cwbb7ktdce8g5nwbaa","name":null,"address":null,"line":null,"join_code":null,"join_link":null,"webhook_url":null,"authorize_url":null,"created_at":"2026-11-26T21:39:23.683422Z"}}}', 1795729163685);
INSERT INTO events VALUES ('proj_01m8cws1cvan670x1d2pgfeeqg', 2, 'message.received', 397, 885, '{"seq":2,"type":"message.received","data":{"customer_id":"cus_01m8cws1cwbb7ktdce8dyy3b3y","agent_id":"agt_01m8cws1cwbb7ktdce8g5nwbaa","message":{"id":"msg_01m8cws1dbgk9m1dzj6wnq369e","conversation_id":"conv_01m8cws1dbgk9m1dzj6w9d1hgb","connection_id":"conn_01m8cws1d3pr1c3pfw6wfg4q65","channel":"test","sender":"ann@example.com","subject":null,"text":"hello from before the upgrade","html":null}}}', 1795729163693);
INSERT INTO events VALUES ('proj_01m8cws1cvan670x1d2pgfeeqg', 3, 'message.received', 397, 1282, '{"seq":3,"type":"message.received","data":{"customer_id":"cus_01m8cws1cwbb7ktdce8dyy3b3y","agent_id":"agt_01m8cws1cwbb7ktdce8g5nwbaa","message":{"id":"msg_01m8cws1dfan7cgtk5avk7sf49","conversation_id":"conv_01m8cws1dbgk9m1dzj6w9d1hgb","connection_id":"conn_01m8cws1d3pr1c3pfw6wfg4q65","channel":"test","sender":"ann@example.com","subject":null,"text":"hello from before the upgrade","html":null}}}', 1795729163696);
INSERT INTO events VALUES ('proj_01m8cws1cvan670x1d2pgfeeqg', 4, 'message.received', 381, 1663, '{"seq":4,"type":"message.received","data":{"customer_id":"cus_01m8cws1cwbb7ktdce8dyy3b3y","agent_id":"agt_01m8cws1cwbb7ktdce8g5nwbaa","message":{"id":"msg_01m8cws1dkv1gr661gz4qkdtnx","conversation_id":"conv_01m8cws1dkv1gr661gz46xzfmp","connection_id":"conn_01m8cws1d3pr1c3pfw6wfg4q65","channel":"test","sender":"bob@example.com","subject":null,"text":"hi, it is bob","html":null}}}', 1795729163700);
INSERT INTO events VALUES ('proj_01m8cws1cvan670x1d2pgfeeqg', 5, 'message.sent', 548, 2211, '{"seq":5,"type":"message.sent","data":{"customer_id":"cus_01m8cws1cwbb7ktdce8dyy3b3y","agent_id":"agt_01m8cws1cwbb7ktdce8g5nwbaa","message":{"id":"msg_01m8cws1dthvkvhfvtb6z7ynyb","conversation_id":"conv_01m8cws1dbgk9m1dzj6w9d1hgb","connection_id":"conn_01m8cws1d3pr1c3pfw6wfg4q65","channel":"test","sender":"conn_01m8cws1d3pr1c3pfw6wfg4q65","subject":null,"text":"hello ann","html":null,"recipient":"ann@example.com","in_reply_to":"msg_01m8cws1dbgk9m1dzj6wnq369e","status":"sent","sent_at":"2026-11-26T21:39:23.727968Z","error":null,"attempts":1}}}', 1795729163734);
INSERT INTO events VALUES ('proj_01m8cws1cvan670x1d2pgfeeqg', 6, 'connection.active', 518, 2729, '{"seq":6,"type":"connection.active","data":{"customer_id":"cus_01m8cws1cwbb7ktdce8dyy3b3y","agent_id":"agt_01m8cws1cwbb7ktdce8g5nwbaa","connection":{"id":"conn_01m8cws1fwkfkkmwwq0rfprrnv","channel":"email","provider":null,"status":"active","customer_id":"cus_01m8cws1cwbb7ktdce8dyy3b3y","agent_id":"agt_01m8cws1cwbb7ktdce8g5nwbaa","name":null,"address":"inbox-orq3cwpycj@comm.localhost","line":null,"join_code":null,"join_link":null,"webhook_url":null,"authorize_url":null,"created_at":"2026-11-26T21:39:23.773264Z"}}}', 1795729163774);
INSERT INTO events VALUES ('proj_01m8cws1cvan670x1d2pgfeeqg', 7, 'message.received', 676, 3405, '{"seq":7,"type":"message.received","data":{"customer_id":"cus_01m8cws1cwbb7ktdce8dyy3b3y","agent_id":"agt_01m8cws1cwbb7ktdce8g5nwbaa","message":{"id":"msg_01m8cws1g8h2mhvytw79x6h4mv","conversation_id":"conv_01m8cws1g7xh9kbsmbp5dqpf6t","connection_id":"conn_01m8cws1fwkfkkmwwq0rfprrnv","channel":"email","sender":"carol@example.org","subject":"before the upgrade","text":"A mail to the inbox.","html":null,"details":{"message_id":"upgrade-fixture-1@example.org","from_name":"Carol","to":["inbox-orq3cwpycj@comm.localhost"],"mail_from":"carol@example.org","auth":{"spf":"none","spf_domain":"example.org","dkim":"none","dkim_signatures":null,"dmarc":"none","dmarc_policy":""}}}}}', 1795729163788);
INSERT INTO events VALUES ('proj_01m8cws1cvan670x1d2pgfeeqg', 8, 'message.received', 382, 3787, '{"seq":8,"type":"message.received","data":{"customer_id":"cus_01m8cws1cwbb7ktdce8dyy3b3y","agent_id":"agt_01m8cws1cwbb7ktdce8g5nwbaa","message":{"id":"msg_01m8cws1hfpqza8n7vt4n6fxb4","conversation_id":"conv_01m8cws1dkv1gr661gz46xzfmp","connection_id":"conn_01m8cws1d3pr1c3pfw6wfg4q65","channel":"test","sender":"bob@example.com","subject":null,"text":"are you there?","html":null}}}', 1795729163823);

INSERT INTO messages VALUES ('msg_01m8cws1dbgk9m1dzj6wnq369e', '2026-11-26 21:39:23.691345+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'conv_01m8cws1dbgk9m1dzj6w9d1hgb', 'conn_01m8cws1d3pr1c3pfw6wfg4q65', 'test', 'inbound', 'received', 'inj_01m8cws1daxqdc6sat83s5hphp', 'ann@example.com', '', NULL, 'hello from before the upgrade', NULL, NULL, NULL, NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cws1dfan7cgtk5avk7sf49', '2026-11-26 21:39:23.69563+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'conv_01m8cws1dbgk9m1dzj6w9d1hgb', 'conn_01m8cws1d3pr1c3pfw6wfg4q65', 'test', 'inbound', 'received', 'inj_01m8cws1dfan7cgtk5aqf84wtb', 'ann@example.com', '', NULL, 'hello from before the upgrade', NULL, NULL, NULL, NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cws1dkv1gr661gz4qkdtnx', '2026-11-26 21:39:23.699049+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'conv_01m8cws1dkv1gr661gz46xzfmp', 'conn_01m8cws1d3pr1c3pfw6wfg4q65', 'test', 'inbound', 'received', 'inj_01m8cws1dj6g2rb1ktxbf0rb7m', 'bob@example.com', '', NULL, 'hi, it is bob', NULL, NULL, NULL, NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cws1dthvkvhfvtb6z7ynyb', '2026-11-26 21:39:23.706888+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'conv_01m8cws1dbgk9m1dzj6w9d1hgb', 'conn_01m8cws1d3pr1c3pfw6wfg4q65', 'test', 'outbound', 'sent', 'test_01m8cws1dthvkvhfvtb6z7ynyb', 'conn_01m8cws1d3pr1c3pfw6wfg4q65', 'ann@example.com', NULL, 'hello ann', NULL, 'msg_01m8cws1dbgk9m1dzj6wnq369e', '["inj_01m8cws1daxqdc6sat83s5hphp"]', NULL, NULL, NULL, 1, false, NULL, '2026-11-26 21:39:23.727968+00', NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cws1g8h2mhvytw79x6h4mv', '2026-11-26 21:39:23.783628+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'conv_01m8cws1g7xh9kbsmbp5dqpf6t', 'conn_01m8cws1fwkfkkmwwq0rfprrnv', 'email', 'inbound', 'received', 'upgrade-fixture-1@example.org', 'carol@example.org', 'inbox-orq3cwpycj@comm.localhost', 'before the upgrade', 'A mail to the inbox.', NULL, NULL, NULL, NULL, '{"to": ["inbox-orq3cwpycj@comm.localhost"], "auth": {"spf": "none", "dkim": "none", "dmarc": "none", "spf_domain": "example.org", "dmarc_policy": "", "dkim_signatures": null}, "from_name": "Carol", "mail_from": "carol@example.org", "message_id": "upgrade-fixture-1@example.org"}', NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cws1hfpqza8n7vt4n6fxb4', '2026-11-26 21:39:23.822743+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'conv_01m8cws1dkv1gr661gz46xzfmp', 'conn_01m8cws1d3pr1c3pfw6wfg4q65', 'test', 'inbound', 'received', 'inj_01m8cws1hez3ts8d3yqq2ekh7g', 'bob@example.com', '', NULL, 'are you there?', NULL, NULL, NULL, NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

INSERT INTO projects VALUES ('proj_01m8cws1cvan670x1d2pgfeeqg', '2026-11-26 21:39:23.676355+00', 'upgrade', 'cus_01m8cws1cwbb7ktdce8dyy3b3y', 'agt_01m8cws1cwbb7ktdce8g5nwbaa', 8, 'acct_01m8cws1gtm5z03y32rqpzeqx3');

INSERT INTO web_sessions VALUES ('wses_01m8cws1gw5k0p0vga0gb8qnwb', '2026-11-26 21:39:23.804368+00', '\x95a287a4bdf8f63b83c37d271b42290712779e69ac35f8c484c2ccb3a6bd233a', 'acct_01m8cws1gtm5z03y32rqpzeqx3', '2026-11-27 09:39:23+00', NULL);

INSERT INTO webhook_attempts VALUES ('wha_01m8cws1e61h4waz1x37x2v1bz', '2026-11-26 21:39:23.718578+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'whk_01m8cws1d8w9tdyr688frqxpyv', 'http://127.0.0.1:46135/hook', 2, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws1eccqp1pyzs3ps57qfx', '2026-11-26 21:39:23.724159+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'whk_01m8cws1d8w9tdyr688frqxpyv', 'http://127.0.0.1:46135/hook', 3, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws1erwfsmjgenrw3h9dbm', '2026-11-26 21:39:23.736068+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'whk_01m8cws1d8w9tdyr688frqxpyv', 'http://127.0.0.1:46135/hook', 4, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws1ey9f9200avhbe3fbmq', '2026-11-26 21:39:23.742025+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'whk_01m8cws1d8w9tdyr688frqxpyv', 'http://127.0.0.1:46135/hook', 5, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws1g4a0ep82eedde5esky', '2026-11-26 21:39:23.780594+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'whk_01m8cws1d8w9tdyr688frqxpyv', 'http://127.0.0.1:46135/hook', 6, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws1gkkwtna8br0cp090w6', '2026-11-26 21:39:23.79592+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'whk_01m8cws1d8w9tdyr688frqxpyv', 'http://127.0.0.1:46135/hook', 7, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cws1hjh55s5rzd5jtcvhwv', '2026-11-26 21:39:23.826112+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'whk_01m8cws1d8w9tdyr688frqxpyv', 'http://127.0.0.1:46135/hook', 8, 0, 0, 'connection refused', false);

INSERT INTO webhooks VALUES ('whk_01m8cws1d8w9tdyr688frqxpyv', '2026-11-26 21:39:23.688401+00', 'proj_01m8cws1cvan670x1d2pgfeeqg', 'http://127.0.0.1:46135/hook', '\x01c73b997f708bcc3e756d06a81f98f7954230370c06df67c57847561edd56e31aa9ad44fd086f03dd7e2533bca2f8d34bca893c2cc30818b1147d3bc4f09b3137da4974399b8ae0e61e33', 'failing', 7, 'connection refused', '2026-11-26 21:39:23.825447+00', 1, '2026-11-26 21:39:24.782939+00', NULL, NULL, NULL, '2026-11-26 21:39:23.883124+00');

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

CREATE UNIQUE INDEX creditentry_account_id_key ON credit_entries USING btree (account_id, key);

CREATE UNIQUE INDEX device_requests_device_hash_key ON device_requests USING btree (device_hash);

CREATE UNIQUE INDEX device_requests_user_hash_key ON device_requests USING btree (user_hash);

CREATE INDEX devicerequest_expires_at ON device_requests USING btree (expires_at);

CREATE INDEX domain_project_id ON domains USING btree (project_id);

CREATE UNIQUE INDEX domain_project_id_domain ON domains USING btree (project_id, domain);

CREATE INDEX domain_status_checked_at ON domains USING btree (status, checked_at);

CREATE INDEX events_project_type ON events USING btree (project_id, type, seq);

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

