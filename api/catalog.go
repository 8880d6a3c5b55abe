package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

type catalogResponse struct {
	Models    []domain.CatalogItem `json:"models"`
	Durations []int                `json:"durations"`
	Presets   []string             `json:"presets"`
	MinLots   int                  `json:"min_lots"`
	MaxLots   int                  `json:"max_lots"`
	// AvailableNow says per model whether anything of it could be sold
	// now (absent when the store cannot tell).
	AvailableNow map[string]bool `json:"available_now,omitempty"`
}

// modelAvailability knows what is free now (Deps.Models: postgres.Store).
type modelAvailability interface {
	ModelsAvailableNow(ctx context.Context, items []domain.CatalogItem) (map[string]bool, error)
}

func (s *Server) getCatalog(c *gin.Context) {
	out, err := s.Catalog(c.Request.Context())
	s.answer(c, http.StatusOK, out, err)
}

// Catalog is the catalog: models with their prices, durations, presets
// and lots, and the models a host could serve now.
func (s *Server) Catalog(ctx context.Context) (CatalogResponse, error) {
	items, err := s.stores.Catalog.Catalog(ctx)
	if err != nil {
		return catalogResponse{}, err
	}
	out := catalogResponse{
		Models: items, Durations: domain.Durations, Presets: domain.Presets,
		MinLots: domain.MinLots, MaxLots: domain.MaxLots,
	}
	if s.models != nil {
		// Unknown on failure (logged): the catalog and its prices stand.
		if out.AvailableNow, err = s.models.ModelsAvailableNow(ctx, items); err != nil {
			s.log.Warn("models available now unknown", "err", err)
		}
	}
	return out, nil
}

type quoteResponse struct {
	domain.Quote
	DisplayName string `json:"display_name"`
}

// price validates a configuration and prices it from the catalog.
func (s *Server) price(ctx context.Context, cfg domain.Configuration) (quoteResponse, error) {
	if err := domain.ValidateConfiguration(cfg); err != nil {
		return quoteResponse{}, err
	}
	item, err := s.stores.Catalog.CatalogItem(ctx, cfg.Model)
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		return quoteResponse{}, domain.FieldError("gpu_model", "Ce modèle de GPU n'est pas proposé.")
	}
	if err != nil {
		return quoteResponse{}, err
	}
	q, err := domain.PriceQuote(item, cfg)
	if err != nil {
		return quoteResponse{}, err
	}
	return quoteResponse{Quote: q, DisplayName: item.DisplayName}, nil
}

func (s *Server) postQuote(c *gin.Context) {
	var cfg domain.Configuration
	if err := s.decodeJSON(c, &cfg, false); err != nil {
		s.fail(c, err)
		return
	}
	q, err := s.Quote(c.Request.Context(), cfg)
	s.answer(c, http.StatusOK, q, err)
}

// Quote validates a configuration and prices it, with whether it could be
// served now.
func (s *Server) Quote(ctx context.Context, cfg domain.Configuration) (QuoteResponse, error) {
	q, err := s.price(ctx, cfg)
	if err != nil {
		return quoteWithAvailability{}, err
	}
	return s.withAvailability(ctx, q), nil
}
