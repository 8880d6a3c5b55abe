package api

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPISpec is the OpenAPI 3.0.3 description of every route, served at
// /v1/openapi.yaml. A test keeps it and the router in step.
//
//go:embed openapi.yaml
var openAPISpec []byte

// OpenAPI returns the API's OpenAPI document (YAML).
func OpenAPI() []byte { return append([]byte(nil), openAPISpec...) }

func serveOpenAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/yaml; charset=utf-8", openAPISpec)
}
