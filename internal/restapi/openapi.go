package restapi

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the OpenAPI 3 document of this API.
//
//go:embed openapi.json
var OpenAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPI)
}
