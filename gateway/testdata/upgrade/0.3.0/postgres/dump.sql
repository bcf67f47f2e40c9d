

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

INSERT INTO accounts VALUES ('acct_01m8cx04evrrajjxgcvmsd7361', '2026-11-26 21:43:16.186311+00', 'local', 'operator', '', 'Local operator', '2026-11-26 21:43:16.186311+00', 100000000);

INSERT INTO api_keys VALUES ('key_01m8cx048swemwmekvz7bpmtm1', '2026-11-26 21:43:15.993908+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', '\xdbc9b61b9a07e248cfb3342d9c84e5c8f2c45bb742b561978b2e76e033f576da', 'sandbox', 'comm_sandbox_…t6rN', NULL, '2026-11-26 21:43:16.007015+00', NULL);
INSERT INTO api_keys VALUES ('key_01m8cx04ffjdv192qpypf06ppf', '2026-11-26 21:43:16.207173+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', '\x026e585f78206a535f6bf163ca9340b4db4158e6bbb2e864a67f40767d0584a0', 'signed_in', 'comm_…q00p', 'comm login', '2026-11-26 21:43:16.209946+00', NULL);

INSERT INTO connections VALUES ('conn_01m8cx0498h8e7f0h4v5abb2k5', '2026-11-26 21:43:16.008666+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'test', '', 'active', NULL, 'cus_01m8cx048pbgh9q7m48sppj9hw', 'agt_01m8cx048pbgh9q7m48xbwx7n8', '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO connections VALUES ('conn_01m8cx04ct3ynbxxeqkdqgtyv0', '2026-11-26 21:43:16.129909+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'email', '', 'active', NULL, 'cus_01m8cx048pbgh9q7m48sppj9hw', 'agt_01m8cx048pbgh9q7m48xbwx7n8', '', NULL, 'inbox-vno4epirko@comm.localhost', 'email:inbox-vno4epirko@comm.localhost', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

INSERT INTO conversations VALUES ('conv_01m8cx049z5zv8k3spq8jmzkbn', '2026-11-26 21:43:16.031995+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'conn_01m8cx0498h8e7f0h4v5abb2k5', 'ann@example.com', 'ann@example.com', NULL, NULL, '2026-11-26 21:43:16.059443+00');
INSERT INTO conversations VALUES ('conv_01m8cx04e3pz0qbdp47gnpa0t7', '2026-11-26 21:43:16.163021+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'conn_01m8cx04ct3ynbxxeqkdqgtyv0', 'upgrade-fixture-1@example.org', 'carol@example.org', 'before the upgrade', NULL, '2026-11-26 21:43:16.163021+00');
INSERT INTO conversations VALUES ('conv_01m8cx04aggzjng9wyjp3e29vp', '2026-11-26 21:43:16.048886+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'conn_01m8cx0498h8e7f0h4v5abb2k5', 'bob@example.com', 'bob@example.com', NULL, NULL, '2026-11-26 21:43:16.235816+00');

INSERT INTO credit_entries VALUES ('cred_01m8cx04ewv9e6c4j46tcdg8dr', '2026-11-26 21:43:16.186311+00', 'acct_01m8cx04evrrajjxgcvmsd7361', 'grant', 10000, 100000000, 'grant:signup', 'Welcome credit for signing in', NULL);

INSERT INTO device_requests VALUES ('dreq_01m8cx04enr8n7my0b1q4bmjxa', '2026-11-26 21:43:16.181755+00', '\x7f9316a93f8af2406c31ffaf3992fd8e44c62ee82d0881202dccd137cdd53686', '\xfde6583c511456ee2e074c6d200b46fe3dc51fad54a30c88d27fd3c1df269fbe', 'consumed', 'proj_01m8cx048pbgh9q7m48ph9jvwy', '127.0.0.1', 'Go-http-client/1.1', 5, NULL, '2026-11-26 21:58:16.181755+00', 'acct_01m8cx04evrrajjxgcvmsd7361', 'proj_01m8cx048pbgh9q7m48ph9jvwy', '2026-11-26 21:43:16.199259+00');

INSERT INTO events VALUES ('proj_01m8cx048pbgh9q7m48ph9jvwy', 1, 'connection.active', 488, 488, '{"seq":1,"type":"connection.active","data":{"customer_id":"cus_01m8cx048pbgh9q7m48sppj9hw","agent_id":"agt_01m8cx048pbgh9q7m48xbwx7n8","connection":{"id":"conn_01m8cx0498h8e7f0h4v5abb2k5","channel":"test","provider":null,"status":"active","customer_id":"cus_01m8cx048pbgh9q7m48sppj9hw","agent_id":"agt_01m8cx048pbgh9q7m48xbwx7n8","name":null,"address":null,"line":null,"join_code":null,"join_link":null,"webhook_url":null,"authorize_url":null,"created_at":"2026-11-26T21:43:16.008666Z"}}}', 1795729396015);
INSERT INTO events VALUES ('proj_01m8cx048pbgh9q7m48ph9jvwy', 2, 'message.received', 397, 885, '{"seq":2,"type":"message.received","data":{"customer_id":"cus_01m8cx048pbgh9q7m48sppj9hw","agent_id":"agt_01m8cx048pbgh9q7m48xbwx7n8","message":{"id":"msg_01m8cx04a1gvhxg83h620rcb58","conversation_id":"conv_01m8cx049z5zv8k3spq8jmzkbn","connection_id":"conn_01m8cx0498h8e7f0h4v5abb2k5","channel":"test","sender":"ann@example.com","subject":null,"text":"hello from before the upgrade","html":null}}}', 1795729396035);
INSERT INTO events VALUES ('proj_01m8cx048pbgh9q7m48ph9jvwy', 3, 'message.received', 381, 1266, '{"seq":3,"type":"message.received","data":{"customer_id":"cus_01m8cx048pbgh9q7m48sppj9hw","agent_id":"agt_01m8cx048pbgh9q7m48xbwx7n8","message":{"id":"msg_01m8cx04ahs6rttswbzejw9b8g","conversation_id":"conv_01m8cx04aggzjng9wyjp3e29vp","connection_id":"conn_01m8cx0498h8e7f0h4v5abb2k5","channel":"test","sender":"bob@example.com","subject":null,"text":"hi, it is bob","html":null}}}', 1795729396051);
INSERT INTO events VALUES ('proj_01m8cx048pbgh9q7m48ph9jvwy', 4, 'message.sent', 548, 1814, '{"seq":4,"type":"message.sent","data":{"customer_id":"cus_01m8cx048pbgh9q7m48sppj9hw","agent_id":"agt_01m8cx048pbgh9q7m48xbwx7n8","message":{"id":"msg_01m8cx04avcqcb53rsbx5cg8z3","conversation_id":"conv_01m8cx049z5zv8k3spq8jmzkbn","connection_id":"conn_01m8cx0498h8e7f0h4v5abb2k5","channel":"test","sender":"conn_01m8cx0498h8e7f0h4v5abb2k5","subject":null,"text":"hello ann","html":null,"recipient":"ann@example.com","in_reply_to":"msg_01m8cx04a1gvhxg83h620rcb58","status":"sent","sent_at":"2026-11-26T21:43:16.066065Z","error":null,"attempts":1}}}', 1795729396075);
INSERT INTO events VALUES ('proj_01m8cx048pbgh9q7m48ph9jvwy', 5, 'connection.active', 518, 2332, '{"seq":5,"type":"connection.active","data":{"customer_id":"cus_01m8cx048pbgh9q7m48sppj9hw","agent_id":"agt_01m8cx048pbgh9q7m48xbwx7n8","connection":{"id":"conn_01m8cx04ct3ynbxxeqkdqgtyv0","channel":"email","provider":null,"status":"active","customer_id":"cus_01m8cx048pbgh9q7m48sppj9hw","agent_id":"agt_01m8cx048pbgh9q7m48xbwx7n8","name":null,"address":"inbox-vno4epirko@comm.localhost","line":null,"join_code":null,"join_link":null,"webhook_url":null,"authorize_url":null,"created_at":"2026-11-26T21:43:16.129909Z"}}}', 1795729396130);
INSERT INTO events VALUES ('proj_01m8cx048pbgh9q7m48ph9jvwy', 6, 'message.received', 676, 3008, '{"seq":6,"type":"message.received","data":{"customer_id":"cus_01m8cx048pbgh9q7m48sppj9hw","agent_id":"agt_01m8cx048pbgh9q7m48xbwx7n8","message":{"id":"msg_01m8cx04e43894hjg6sgj5sx34","conversation_id":"conv_01m8cx04e3pz0qbdp47gnpa0t7","connection_id":"conn_01m8cx04ct3ynbxxeqkdqgtyv0","channel":"email","sender":"carol@example.org","subject":"before the upgrade","text":"A mail to the inbox.","html":null,"details":{"message_id":"upgrade-fixture-1@example.org","from_name":"Carol","to":["inbox-vno4epirko@comm.localhost"],"mail_from":"carol@example.org","auth":{"spf":"none","spf_domain":"example.org","dkim":"none","dkim_signatures":null,"dmarc":"none","dmarc_policy":""}}}}}', 1795729396173);
INSERT INTO events VALUES ('proj_01m8cx048pbgh9q7m48ph9jvwy', 7, 'message.received', 382, 3390, '{"seq":7,"type":"message.received","data":{"customer_id":"cus_01m8cx048pbgh9q7m48sppj9hw","agent_id":"agt_01m8cx048pbgh9q7m48xbwx7n8","message":{"id":"msg_01m8cx04gcxtdahjp08pkbs8n2","conversation_id":"conv_01m8cx04aggzjng9wyjp3e29vp","connection_id":"conn_01m8cx0498h8e7f0h4v5abb2k5","channel":"test","sender":"bob@example.com","subject":null,"text":"are you there?","html":null}}}', 1795729396239);

INSERT INTO idempotency_keys VALUES ('idk_01m8cx049v0rq5dhyv9pw063rq', '2026-11-26 21:43:16.026852+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'upgrade-fixture-inbound-1', '\x41c3aa3999c37d11780e8796facbdab72642f547af85ed9c2bfd5c68d87be1f4', '2026-11-26 21:43:16.026852+00', 201, '\x01b31ab723930bebdbba8a7dbcd135a0f23f97e552e516a7911feed1aea683502a5708bb156bef6738b0fd67e887318028898c3cdcbf113171c5b4c1f625480ad545dbfc8e94f9a4321b0cd98fb764067c9f5f1c18dacf70e02f0b5587571197d07d8745360b90abcf26a839334665623c8f432877959e59a13e759be89af9e46ad05f1f31b485be81ecd7d0cde3376efdb2976724b020f02d7229a059f3da0c81ba3c50d6ec23cb5069e58585464b6347f5d4f32ec9f3b8e551d76fb6b1bbf0d190f01decd2d52875b6d3e5de6d08e2ff41803746c53bc782a0322c0bd2f2a94998830c31df4e6e916c492558aa5e1bd2fa4c8b5177c3ceeb2d659e3ae44d00accad1fd4548931ebd6ca55dddbd3163e90afb38ac7d963080f1a39e6576c475abed5ae413133e76e18c47525fcb02df563ed59f660a79b419ad768d71ac26719e11b52be8886fe4ecd94f0154d1bb01c21d837e5c703e57ae94b9b56c4ef2987e1a11cf7d8de87792a01c6cdcaf94f01065c9dc3984d9ceb91e762d52b564227e5ff99bcbb226e5e286ef9b6fbf9b75fc3d9be16d6a047488f0e8d3ea27c76e7a95dca9e196849dfcbb6983fc0446d9de516ff93f8471f3c030bbc03f732809002695fc2eeb1ea2fa4b148d5a4f3a2d3e98d2f3f11e7449dd883d26f29640b96762cfba2612c7c244f63394aa3f3244dd8d01cf6018dcadea70efcf9328e8af02bb60b4f2e3fef5623d03e362793435a2ff837d3d015be87f6a868d4e318efae0935c6fddf03e2a815daf0cd69ea9b564e6c70eeaeb9e7a1a0987cd2092a5dacf3ea3818e5b6421e080421c70edd18d9258fc1e2b41cef647ad36fc9544b6eaecdde28303872a0edba6b8ef3af2e2f8f6c16b9852ffaf0e463c46f2468e83bfae06791b48c38555f8f145049b9726f9a0c410acccc624', 430);

INSERT INTO messages VALUES ('msg_01m8cx04a1gvhxg83h620rcb58', '2026-11-26 21:43:16.031995+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'conv_01m8cx049z5zv8k3spq8jmzkbn', 'conn_01m8cx0498h8e7f0h4v5abb2k5', 'test', 'inbound', 'received', 'inj_01m8cx049z5zv8k3spq52vnyc9', 'ann@example.com', '', NULL, 'hello from before the upgrade', NULL, NULL, NULL, NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cx04ahs6rttswbzejw9b8g', '2026-11-26 21:43:16.048886+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'conv_01m8cx04aggzjng9wyjp3e29vp', 'conn_01m8cx0498h8e7f0h4v5abb2k5', 'test', 'inbound', 'received', 'inj_01m8cx04aggzjng9wyjksn3z1s', 'bob@example.com', '', NULL, 'hi, it is bob', NULL, NULL, NULL, NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cx04avcqcb53rsbx5cg8z3', '2026-11-26 21:43:16.059443+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'conv_01m8cx049z5zv8k3spq8jmzkbn', 'conn_01m8cx0498h8e7f0h4v5abb2k5', 'test', 'outbound', 'sent', 'test_01m8cx04avcqcb53rsbx5cg8z3', 'conn_01m8cx0498h8e7f0h4v5abb2k5', 'ann@example.com', NULL, 'hello ann', NULL, 'msg_01m8cx04a1gvhxg83h620rcb58', '["inj_01m8cx049z5zv8k3spq52vnyc9"]', NULL, NULL, NULL, 1, false, NULL, '2026-11-26 21:43:16.066065+00', NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cx04e43894hjg6sgj5sx34', '2026-11-26 21:43:16.163021+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'conv_01m8cx04e3pz0qbdp47gnpa0t7', 'conn_01m8cx04ct3ynbxxeqkdqgtyv0', 'email', 'inbound', 'received', 'upgrade-fixture-1@example.org', 'carol@example.org', 'inbox-vno4epirko@comm.localhost', 'before the upgrade', 'A mail to the inbox.', NULL, NULL, NULL, NULL, '{"to": ["inbox-vno4epirko@comm.localhost"], "auth": {"spf": "none", "dkim": "none", "dmarc": "none", "spf_domain": "example.org", "dmarc_policy": "", "dkim_signatures": null}, "from_name": "Carol", "mail_from": "carol@example.org", "message_id": "upgrade-fixture-1@example.org"}', NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO messages VALUES ('msg_01m8cx04gcxtdahjp08pkbs8n2', '2026-11-26 21:43:16.235816+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'conv_01m8cx04aggzjng9wyjp3e29vp', 'conn_01m8cx0498h8e7f0h4v5abb2k5', 'test', 'inbound', 'received', 'inj_01m8cx04gb3rm5nxa00679tfc9', 'bob@example.com', '', NULL, 'are you there?', NULL, NULL, NULL, NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

INSERT INTO projects VALUES ('proj_01m8cx048pbgh9q7m48ph9jvwy', '2026-11-26 21:43:15.991165+00', 'upgrade', 'cus_01m8cx048pbgh9q7m48sppj9hw', 'agt_01m8cx048pbgh9q7m48xbwx7n8', 7, 'acct_01m8cx04evrrajjxgcvmsd7361');

INSERT INTO provider_states VALUES ('gateway/encryption-key-check', '\xba0a89076046376298208dd31a7c1009a40c1846321a2b4be5fecd885675abcb', '2026-11-26 21:43:15.961096+00');

INSERT INTO web_sessions VALUES ('wses_01m8cx04exenfgcbz0ktysx1sg', '2026-11-26 21:43:16.189302+00', '\xe9a57236221c0873d1aea82432ed32aa4a0646747c4ed61eee6f68be948ec21f', 'acct_01m8cx04evrrajjxgcvmsd7361', '2026-11-27 09:43:16+00', NULL);

INSERT INTO webhook_attempts VALUES ('wha_01m8cx04abpx6wrpsxk4mw41e6', '2026-11-26 21:43:16.04323+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'whk_01m8cx049pwh6mfpsx2qb1gcnf', 'http://127.0.0.1:34891/hook', 2, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cx04ay1nqbg5qp3rfp6y19', '2026-11-26 21:43:16.062378+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'whk_01m8cx049pwh6mfpsx2qb1gcnf', 'http://127.0.0.1:34891/hook', 3, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cx04bgc8r629r6sgd773nj', '2026-11-26 21:43:16.08075+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'whk_01m8cx049pwh6mfpsx2qb1gcnf', 'http://127.0.0.1:34891/hook', 4, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cx04dfe8e086ys6316zerx', '2026-11-26 21:43:16.143976+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'whk_01m8cx049pwh6mfpsx2qb1gcnf', 'http://127.0.0.1:34891/hook', 5, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cx04ek582qsjqbrf5d31ab', '2026-11-26 21:43:16.179841+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'whk_01m8cx049pwh6mfpsx2qb1gcnf', 'http://127.0.0.1:34891/hook', 6, 204, 0, NULL, true);
INSERT INTO webhook_attempts VALUES ('wha_01m8cx04jch0fdxqkn3ryb9j8n', '2026-11-26 21:43:16.300261+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'whk_01m8cx049pwh6mfpsx2qb1gcnf', 'http://127.0.0.1:34891/hook', 7, 0, 0, 'connection refused', false);

INSERT INTO webhooks VALUES ('whk_01m8cx049pwh6mfpsx2qb1gcnf', '2026-11-26 21:43:16.022347+00', 'proj_01m8cx048pbgh9q7m48ph9jvwy', 'http://127.0.0.1:34891/hook', '\x012a6c91f93d36a0364350d4093836f8fc7471388ebe812faee572faa039c6c3367780a153c271cecc9f80fe6d22edaf516dba93604809b6991734724594c031555ce5092520d7cd8d7549', 'failing', 6, 'connection refused', '2026-11-26 21:43:16.299738+00', 1, '2026-11-26 21:43:17.108289+00', NULL, NULL, NULL, '2026-11-26 21:43:16.314387+00');

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

