package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"unicode"
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
//
// A body must be sent as Content-Type: application/json: a browser sends
// that type cross-site only after a CORS preflight, which this API never
// grants, whereas a form or text/plain body needs none (login CSRF).
func (s *Server) decodeJSON(c *gin.Context, v any, optional bool) error {
	if c.Request.ContentLength != 0 && c.Request.Body != nil && c.Request.Body != http.NoBody {
		mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
		if err != nil || mt != "application/json" {
			return errMediaType
		}
	}
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
	return refuseNUL(reflect.ValueOf(v), "")
}

// errNUL is the answer to a NUL character in any input: PostgreSQL cannot
// store it in text, and no field of ours has a use for it.
func errNUL(field string) *domain.Error {
	return domain.FieldError(field, "Le texte contient un caractère nul (U+0000), refusé.")
}

// refuseNUL walks a decoded request body and refuses a NUL character in any
// string, naming the JSON field. Free-text fields are checked further by
// text and personName; this catches every other field (emails, models,
// assets…) before it reaches a query.
func refuseNUL(v reflect.Value, field string) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return refuseNUL(v.Elem(), field)
		}
	case reflect.String:
		if strings.ContainsRune(v.String(), 0) {
			return errNUL(field)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := field
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
				name = tag
			} else if !f.Anonymous {
				name = f.Name
			}
			if err := refuseNUL(v.Field(i), name); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := refuseNUL(v.Index(i), field); err != nil {
				return err
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if err := refuseNUL(it.Key(), field); err != nil {
				return err
			}
			if err := refuseNUL(it.Value(), field); err != nil {
				return err
			}
		}
	}
	return nil
}

// refuseControlInURL answers 400 to a path or query holding a control
// character (%00 and the like): no reference, id or parameter of ours has
// one, and PostgreSQL refuses NUL.
func (s *Server) refuseControlInURL(c *gin.Context) {
	query, err := url.QueryUnescape(c.Request.URL.RawQuery)
	if err != nil {
		query = c.Request.URL.RawQuery
	}
	if strings.IndexFunc(c.Request.URL.Path+query, unicode.IsControl) >= 0 {
		s.fail(c, domain.FieldError("", "L'adresse contient un caractère de contrôle, refusé."))
		return
	}
	c.Next()
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

// text trims a free-text input and checks its length in characters. Line
// breaks and tabs are kept (messages, commands, error output); any other
// control character is refused, NUL first of all.
func text(field, value string, minLen, maxLen int, message string) (string, error) {
	v := strings.TrimSpace(value)
	if n := utf8.RuneCountInString(v); n < minLen || n > maxLen {
		return "", domain.FieldError(field, message)
	}
	if strings.ContainsRune(v, 0) {
		return "", errNUL(field)
	}
	if strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' }) >= 0 {
		return "", domain.FieldError(field, "Le texte contient un caractère de contrôle, refusé.")
	}
	return v, nil
}

// personName is text on one line: no control character at all, nor the
// invisible format characters (bidirectional overrides, zero-width…) that
// would let a name display as something else in support's views and mails.
func personName(field, value string, maxLen int, message string) (string, error) {
	v, err := text(field, value, 1, maxLen, message)
	if err != nil {
		return "", err
	}
	if strings.IndexFunc(v, func(r rune) bool {
		return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
	}) >= 0 {
		return "", domain.FieldError(field, "Le nom ne peut contenir ni retour à la ligne, ni caractère de contrôle ou invisible.")
	}
	return v, nil
}
