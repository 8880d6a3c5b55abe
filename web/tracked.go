package web

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/memo"
)

// An order's and a top-up's pages, and their live parts, are read again
// and again (reloads, and htmx at each event of their streams), mostly
// unchanged. What was made of the same data is remembered under the data's
// digest (package memo: every field, so nothing that changes a page can be
// left out of its key): a read whose page did not change skips the
// templates and the compression, most of its cost. The templates' functions
// depend on their arguments alone, and the key holds the session's account
// and CSRF token, so a page is only ever served to the session it was made
// for.

// madePages bounds the pages remembered (about 35 KB each with their gzip).
const madePages = 1000

// madePage is a page made from its data: the HTML, its gzip when worth it,
// and the version of its live part.
type madePage struct {
	html, gz []byte
	version  string
}

// renderTracked renders an order's or a top-up's page (tmpl) with its live
// part (box, answered again at liveURL on trigger), the notice a redirect
// asked for, and refusal's message if not nil.
func (s *Site) renderTracked(c *gin.Context, p page, refusal error, tmpl, box, liveURL, trigger string) {
	p.Notice = notices[c.Query("info")]
	status := http.StatusOK
	if refusal != nil {
		p.Error, status = domain.ErrorMessage(refusal), statusOf(refusal)
	}
	m, err := s.made(c, tmpl, p, box, liveURL, trigger)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.zip.writeMade(c, status, m)
}

// renderLive answers a live endpoint: 204 if the client has this version.
func (s *Site) renderLive(c *gin.Context, p page, box, url, trigger string) {
	m, err := s.made(c, "live", p, box, url, trigger)
	if err != nil {
		s.fail(c, err)
		return
	}
	if c.Query("v") == m.version {
		c.Status(http.StatusNoContent)
		return
	}
	s.zip.writeMade(c, http.StatusOK, m)
}

// made is the page tmpl with its live part made of p, remembered or made
// now.
func (s *Site) made(c *gin.Context, tmpl string, p page, box, url, trigger string) (madePage, error) {
	s.prepare(c, &p)
	k, ok := memo.Digest(tmpl+"\x00"+box+"\x00"+url+"\x00"+trigger, p)
	if ok {
		if m, hit := s.madePages.Get(k); hit {
			return m, nil
		}
	}
	version, err := s.withLive(&p, box, url, trigger)
	if err != nil {
		return madePage{}, err
	}
	html, err := s.execute(tmpl, p)
	if err != nil {
		return madePage{}, err
	}
	m := madePage{html: html, version: version}
	if len(html) > minZip {
		m.gz = s.zip.compress(html)
	}
	if ok {
		s.madePages.Put(k, m)
	}
	return m, nil
}
