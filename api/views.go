package api

// The bodies the API answers, named for Go clients in the same binary (the
// web site decodes them): one definition each, here in package api.
type (
	// CatalogResponse is GET /v1/catalog.
	CatalogResponse = catalogResponse
	// QuoteResponse is POST /v1/quote.
	QuoteResponse = quoteWithAvailability
	// SessionResponse is GET /v1/me (and register, login).
	SessionResponse = sessionResponse
	// OrderView is an order in a list; OrderDetail is GET /v1/orders/{ref}.
	OrderView   = orderView
	OrderDetail = orderDetail
	// TopUpView is a top-up in a list; TopUpDetail is GET /v1/topups/{ref}.
	TopUpView   = topUpView
	TopUpDetail = topUpDetail
	// IntentView is a payment request with its payments seen on chain.
	IntentView = intentView
	// ActivityResponse is GET /v1/me/activity.
	ActivityResponse = activityResponse
)

// StatusFor is the HTTP status the API answers a domain error code with
// (the site answers its pages' errors with the same).
func StatusFor(code string) int { return statusFor(code) }
