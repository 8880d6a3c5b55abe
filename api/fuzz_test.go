package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"
)

// fuzzRoute is one state-changing route with its path parameters filled.
type fuzzRoute struct {
	path string
	a    auth
}

var ginParamRe = regexp.MustCompile(`:(\w+)`)

// FuzzJSONBodies sends arbitrary bodies to every POST route of the router
// (found in the router itself, so a new route is fuzzed without being
// listed here), as a customer or a support agent, on a real PostgreSQL
// database: no input may answer 5xx or anything but the documented error
// shape.
//
//	go test ./api -run '^$' -fuzz '^FuzzJSONBodies$' -fuzztime 10m
func FuzzJSONBodies(f *testing.F) {
	h := newHarness(f)
	c := h.register("fuzz@example.com")
	ref := h.order(c)
	r := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 10000}, c.auth)
	require.Equal(f, http.StatusCreated, r.Code, r.Body.String())
	topup := r.obj("topup")["reference"].(string)
	r = h.do("POST", "/v1/orders/"+ref+"/support-requests", map[string]any{"message": "aide"}, c.auth)
	require.Equal(f, http.StatusCreated, r.Code, r.Body.String())
	requestID := fmt.Sprint(int64(r.body["id"].(float64)))

	var routes []fuzzRoute
	for _, rt := range h.h.(*gin.Engine).Routes() {
		if rt.Method != http.MethodPost || strings.HasSuffix(rt.Path, "/logout") {
			continue // logout takes no body and would end the fuzzing session
		}
		path := ginParamRe.ReplaceAllStringFunc(rt.Path, func(p string) string {
			switch {
			case p == ":ref" && strings.Contains(rt.Path, "/topups/"):
				return topup
			case p == ":ref":
				return ref
			case p == ":id" && strings.Contains(rt.Path, "/support-requests/"):
				return requestID
			default:
				return "PI-FUZZ0000"
			}
		})
		a := c.auth
		if strings.HasPrefix(path, "/v1/support/") {
			a = auth{bearer: agentToken}
		}
		routes = append(routes, fuzzRoute{path: path, a: a})
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].path < routes[j].path })
	require.NotEmpty(f, routes)

	seeds := []string{
		`{}`, ``, `null`, `[]`, `{"message":"\u0000"}`, `{"reason":"\u0000abc"}`,
		`{"first_name":"Ada","last_name":"Lovelace","email":"seed@example.com","password":"correct horse battery staple"}`,
		`{"email":"fuzz@example.com","password":"correct horse battery staple","bearer":true}`,
		`{"gpu_model":"rtx-a5000","lots":1,"duration_days":3,"preset":"python"}`,
		`{"gpu_model":"b200","lots":99999999999999999999,"duration_days":-3,"preset":"\ud800"}`,
		`{"amount_cents":10000}`, `{"asset":"BTC","network":"bitcoin"}`,
		`{"amount_cents":9223372036854775807,"reason":"geste commercial"}`, `{"days":30,"reason":"geste commercial"}`,
		`{"message":"ça ne démarre pas","launch_command":"python train.py","versions":"torch 2.5","first_error":"CUDA OOM"}`,
		`{"a":` + strings.Repeat(`[`, 10000), `{"reason":"` + strings.Repeat("é", 3000) + `"}`,
	}
	for i, s := range seeds {
		for j := range routes {
			if (i+j)%3 == 0 {
				f.Add(uint8(j), []byte(s))
			}
		}
	}

	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := routes[int(route)%len(routes)]
		req := httptest.NewRequest(http.MethodPost, rt.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+rt.a.bearer)
		rec := httptest.NewRecorder()
		h.h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("POST %s %q: %d %s", rt.path, body, rec.Code, rec.Body.String())
		}
		if rec.Code >= 400 {
			var e struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("POST %s %q: %d without the error shape: %s", rt.path, body, rec.Code, rec.Body.String())
			}
		}
	})
}
