package postgres

import "github.com/kernodeck/kernodeck/domain"

var domainNotFound = domain.ErrNotFound
