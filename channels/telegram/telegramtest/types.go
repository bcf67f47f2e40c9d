package telegramtest

// Update is a Bot API Update, the kinds the fake produces.
type Update struct {
	UpdateID      int64    `json:"update_id"`
	Message       *Message `json:"message,omitempty"`
	EditedMessage *Message `json:"edited_message,omitempty"`
	ChannelPost   *Message `json:"channel_post,omitempty"`
}

// Message is a Bot API Message (the fields the fake knows).
type Message struct {
	MessageID       int64    `json:"message_id"`
	MessageThreadID int64    `json:"message_thread_id,omitempty"`
	From            *User    `json:"from,omitempty"`
	SenderChat      *Chat    `json:"sender_chat,omitempty"`
	Chat            Chat     `json:"chat"`
	Date            int64    `json:"date"`
	Text            string   `json:"text,omitempty"`
	Caption         string   `json:"caption,omitempty"`
	ReplyToMessage  *Message `json:"reply_to_message,omitempty"`
	Photo           []Media  `json:"photo,omitempty"`
	Document        *Media   `json:"document,omitempty"`
	Audio           *Media   `json:"audio,omitempty"`
	Voice           *Media   `json:"voice,omitempty"`
	Video           *Media   `json:"video,omitempty"`
	VideoNote       *Media   `json:"video_note,omitempty"`
	Animation       *Media   `json:"animation,omitempty"`
	Sticker         *Media   `json:"sticker,omitempty"`
	NewChatMembers  []User   `json:"new_chat_members,omitempty"`
	PinnedMessage   *Message `json:"pinned_message,omitempty"`
}

// User is a Bot API User.
type User struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name,omitempty"`
	Username  string `json:"username,omitempty"`
}

// Chat is a Bot API Chat.
type Chat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"` // "private", "group", "supergroup", "channel"
	Title     string `json:"title,omitempty"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
}

// Media is a file of a message: PhotoSize, Document, Audio, Voice, Video,
// VideoNote, Animation or Sticker (their common fields).
type Media struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileSize     int64  `json:"file_size,omitempty"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	Width        int    `json:"width,omitempty"`
	Height       int    `json:"height,omitempty"`
	Duration     int    `json:"duration,omitempty"`
	IsAnimated   bool   `json:"is_animated,omitempty"`
	IsVideo      bool   `json:"is_video,omitempty"`
}

// Sent is a message the bot sent (sendMessage), as the fake recorded it.
type Sent struct {
	ChatID    string // as the request named it ("4242", "@channel")
	MessageID int64
	Text      string
	// ReplyTo is reply_parameters.message_id (or the older
	// reply_to_message_id); 0 when not a reply.
	ReplyTo int64
	// AllowWithoutReply is reply_parameters.allow_sending_without_reply.
	AllowWithoutReply bool
}

// Action is a chat action the bot sent (sendChatAction).
type Action struct {
	ChatID string
	Action string // "typing" ...
}

// Webhook is a bot's webhook registration.
type Webhook struct {
	URL            string
	SecretToken    string
	AllowedUpdates []string
}

// Failure is an answer the fake gives instead of doing a call.
type Failure struct {
	// Code and Description make {"ok":false,"error_code":Code,"description":Description}.
	Code        int
	Description string
	// RetryAfter, when not 0, is parameters.retry_after (seconds).
	RetryAfter int
	// Hang holds the request until the client gives up, answering nothing.
	Hang bool
}

// Failures Telegram gives.
var (
	Blocked      = Failure{Code: 403, Description: "Forbidden: bot was blocked by the user"}
	ChatNotFound = Failure{Code: 400, Description: "Bad Request: chat not found"}
	Unauthorized = Failure{Code: 401, Description: "Unauthorized"}
	BadGateway   = Failure{Code: 502, Description: "Bad Gateway"}
	Hang         = Failure{Hang: true}
)

// TooManyRequests is Telegram's flood-control answer.
func TooManyRequests(retryAfter int) Failure {
	return Failure{Code: 429, Description: "Too Many Requests: retry after " + itoa(int64(retryAfter)), RetryAfter: retryAfter}
}
