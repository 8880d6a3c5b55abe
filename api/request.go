package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// limitBody refuses bodies over Config.MaxBodyBytes: at once when the
// declared length is over, otherwise when reading passes the limit.
func (s *Server) limitBody(c *gin.Context) {
	if c.Request.ContentLength > s.cfg.MaxBodyBytes {
		s.fail(c, s.errTooLarge())
		return
	}
	if c.Request.Body != nil {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.MaxBodyBytes)
	}
	c.Next()
}

func (s *Server) errTooLarge() *domain.Error {
	return domain.Errorf(domain.ECodeTooLarge,
		"Le corps de la requête dépasse la taille autorisée (%d Kio).", s.cfg.MaxBodyBytes>>10)
}

func invalidJSON(field, format string, args ...any) *domain.Error {
	return &domain.Error{Code: domain.ECodeInvalidJSON, Message: fmt.Sprintf(format, args...), Field: field}
}

// decodeJSON reads exactly one JSON object into v, refusing unknown fields.
// With optional, an empty body leaves v as it is. Nothing has been written
// anywhere when it fails.
func (s *Server) decodeJSON(c *gin.Context, v any, optional bool) error {
	if c.Request.Body == nil {
		if optional {
			return nil
		}
		return invalidJSON("", "Le corps de la requête est vide : un objet JSON est attendu.")
	}
	dec := json.NewDecoder(c.Request.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) && optional {
			return nil
		}
		return s.jsonError(err)
	}
	// A single value: only white space may follow.
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return s.errTooLarge()
		}
		return invalidJSON("", "Le corps de la requête doit contenir un seul objet JSON.")
	}
	return nil
}

func (s *Server) jsonError(err error) error {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return s.errTooLarge()
	case errors.Is(err, io.EOF):
		return invalidJSON("", "Le corps de la requête est vide : un objet JSON est attendu.")
	case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF):
		return invalidJSON("", "Le corps de la requête n'est pas un JSON valide.")
	case errors.As(err, &ute):
		if ute.Field == "" {
			return invalidJSON("", "Le corps de la requête doit être un objet JSON.")
		}
		return invalidJSON(ute.Field, "Le champ %q n'a pas le type attendu.", ute.Field)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalidJSON(field, "Champ inconnu : %q.", field)
	default:
		return invalidJSON("", "Le corps de la requête n'est pas un JSON valide.")
	}
}

// text trims a free-text input and checks its length in characters.
func text(field, value string, minLen, maxLen int, message string) (string, error) {
	v := strings.TrimSpace(value)
	if n := utf8.RuneCountInString(v); n < minLen || n > maxLen {
		return "", domain.FieldError(field, message)
	}
	return v, nil
}
