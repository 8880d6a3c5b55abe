package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/postgres"
)

var ginParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// TestOpenAPIDescribesEveryRoute fails when gin has a route the document
// does not describe, or the document describes one gin does not have.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	require.Equal(t, "3.0.3", doc.OpenAPI)

	srv := api.New(api.Config{Argon2: api.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}},
		api.Deps{Stores: app.APIStores(postgres.NewStore(nil, nil, "")), // building the router only: never called
			Workflows: newFakeWorkflows(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	engine, ok := srv.Handler().(*gin.Engine)
	require.True(t, ok)

	inGin := map[string]bool{}
	for _, r := range engine.Routes() {
		inGin[r.Method+" "+ginParam.ReplaceAllString(r.Path, "{$1}")] = true
	}
	inDoc := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			inDoc[method+" "+path] = true
			require.NotEmpty(t, op.Responses.Map(), "%s %s has no responses", method, path)
			if method == http.MethodPost && !strings.HasSuffix(path, "/logout") &&
				!strings.HasSuffix(path, "/pay-from-balance") && !strings.HasSuffix(path, "/cancel") &&
				!strings.HasSuffix(path, "/verify-email/resend") {
				require.NotNil(t, op.RequestBody, "%s %s has no request body", method, path)
			}
		}
	}
	var missing, extra []string
	for k := range inGin {
		if !inDoc[k] {
			missing = append(missing, k)
		}
	}
	for k := range inDoc {
		if !inGin[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	require.Empty(t, missing, "routes not described by openapi.yaml")
	require.Empty(t, extra, "routes described by openapi.yaml but not served")
	require.GreaterOrEqual(t, len(inGin), 30)
}

func TestOpenAPIServed(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/v1/openapi.yaml", nil, auth{})
	require.Equal(t, http.StatusOK, r.Code)
	require.Contains(t, r.Header().Get("Content-Type"), "yaml")
	require.Equal(t, string(api.OpenAPI()), r.Body.String())
}

// A response with a schema of its own must not share a schema's name:
// client generators make a type of each and stop on the clash (oapi-codegen
// v2.8.2 and ogen refused "KeyRequest"). A response that only refers to
// the schema of its name is the same type.
func TestOpenAPIResponseNamesAreNotSchemaNames(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	require.NoError(t, err)
	for name, r := range doc.Components.Responses {
		if _, clash := doc.Components.Schemas[name]; !clash {
			continue
		}
		for media, c := range r.Value.Content {
			require.Equal(t, "#/components/schemas/"+name, c.Schema.Ref,
				"response %s (%s) defines its own schema under a schema's name", name, media)
		}
	}
}
