package domain

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // Europe/Paris without the system's zoneinfo
)

// FrenchUSD renders cents as customers read amounts, on the site and in
// mails: "3 118,00 USD" (a narrow no-break space between thousands, a
// decimal comma). The API's JSON keeps FormatUSD's "3118.00".
func FrenchUSD(cents int64) string {
	s := FormatUSD(cents)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	whole, frac, _ := strings.Cut(s, ".")
	return sign + thousands(whole) + "," + frac + " USD"
}

// FrenchInt is n as French texts write counts: "50 000".
func FrenchInt(n int64) string {
	if n < 0 {
		return "-" + thousands(strconv.FormatInt(-n, 10))
	}
	return thousands(strconv.FormatInt(n, 10))
}

// thousands groups a string of digits by three with a narrow no-break
// space, the French thousands separator.
func thousands(digits string) string {
	var b strings.Builder
	for i, r := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteRune('\u202f')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// InParis is t on Paris's clock (the shop's time zone).
func InParis(t time.Time) time.Time { return t.In(paris) }

// usdInText is an amount as FormatUSD writes it into texts ("3118.00 USD"),
// not part of a longer number.
var usdInText = regexp.MustCompile(`(^|[^0-9.,])(-?[0-9]{1,15})\.([0-9]{2}) USD\b`)

// FrenchAmounts rewrites with FrenchUSD the amounts a text spells
// "3118.00 USD". Timeline entries, refusals and mails' messages are written
// that way, some by workflows into their histories: they are formatted
// where they are shown, never rewritten where they are kept.
func FrenchAmounts(s string) string {
	if !strings.Contains(s, " USD") {
		return s
	}
	return usdInText.ReplaceAllStringFunc(s, func(m string) string {
		sub := usdInText.FindStringSubmatch(m)
		whole, err1 := strconv.ParseInt(sub[2], 10, 64)
		frac, err2 := strconv.ParseInt(sub[3], 10, 64)
		if err1 != nil || err2 != nil {
			return m
		}
		cents := whole*100 + frac
		if strings.HasPrefix(sub[2], "-") {
			cents = whole*100 - frac
		}
		return sub[1] + FrenchUSD(cents)
	})
}

// GPUNames names GPU models for customers: the catalog's display name of
// each model code ("b200" -> "NVIDIA B200"). It is the one formatter of
// model names of the site and the mails.
type GPUNames map[string]string

// NewGPUNames maps the catalog's models to their display names.
func NewGPUNames(items []CatalogItem) GPUNames {
	n := GPUNames{}
	for _, it := range items {
		if it.DisplayName != "" {
			n[it.Model] = it.DisplayName
		}
	}
	return n
}

// Name is model's display name, or the code itself when the catalog has
// no name for it.
func (n GPUNames) Name(model string) string {
	if name, ok := n[model]; ok {
		return name
	}
	return model
}

// Text replaces each model code written as a word in s ("Réservation de 2
// GPU b200 en cours.") by its display name: texts written with the code,
// some in workflow histories, are named where they are shown.
func (n GPUNames) Text(s string) string {
	if len(n) == 0 {
		return s
	}
	var b strings.Builder
	i := 0
	for i < len(s) {
		if !isCodeChar(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && isCodeChar(s[j]) {
			j++
		}
		word := s[i:j]
		if name, ok := n[word]; ok {
			word = name
		}
		b.WriteString(word)
		i = j
	}
	return b.String()
}

// GPUNames names the order's model (none when its name is unknown).
func (o Order) GPUNames() GPUNames {
	if o.ModelName == "" {
		return nil
	}
	return GPUNames{o.Model: o.ModelName}
}

// GPUName is the order's model as customers read it ("NVIDIA B200").
func (o Order) GPUName() string { return o.GPUNames().Name(o.Model) }

// isCodeChar: the characters of a model code (gpu_models.model's check).
func isCodeChar(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' }

// CustomerText is a stored French text (timeline entry, refusal) as shown
// to a customer and to support: model codes named, amounts, dates and
// networks in the French way.
func CustomerText(s string, names GPUNames) string {
	return FrenchPlurals(FrenchNetworks(FrenchDates(FrenchAmounts(names.Text(s)))))
}

// pluralInText is a count and its noun written "3 jour(s)" by older
// texts kept in histories.
var pluralInText = regexp.MustCompile(`\b(-?[0-9]+) ([\p{L}']+)\(s\)`)

// FrenchPlurals writes "1 jour(s)" as "1 jour" and "3 jour(s)" as "3
// jours" (Plural), for texts written before Plural.
func FrenchPlurals(s string) string {
	if !strings.Contains(s, "(s)") {
		return s
	}
	return pluralInText.ReplaceAllStringFunc(s, func(m string) string {
		sub := pluralInText.FindStringSubmatch(m)
		n, err := strconv.Atoi(sub[1])
		if err != nil {
			return m
		}
		return Plural(n, sub[2], sub[2]+"s")
	})
}

// NetworkNames are the networks as people read them ("Bitcoin"), on the
// site, the console and in mails.
var NetworkNames = map[string]string{
	NetworkBitcoin: "Bitcoin", NetworkEthereum: "Ethereum", NetworkTron: "Tron",
	NetworkSolana: "Solana", NetworkLitecoin: "Litecoin",
}

// NetworkName is network's name as people read it, or the code itself.
func NetworkName(network string) string {
	if n, ok := NetworkNames[network]; ok {
		return n
	}
	return network
}

// networkInText is a network code after "réseau" in a stored text
// ("sur le réseau bitcoin").
var networkInText = regexp.MustCompile(`\bréseau (bitcoin|ethereum|tron|solana|litecoin)\b`)

// FrenchNetworks names the networks a text spells by their code after
// "réseau" ("réseau bitcoin" -> "réseau Bitcoin").
func FrenchNetworks(s string) string {
	if !strings.Contains(s, "réseau ") {
		return s
	}
	return networkInText.ReplaceAllStringFunc(s, func(m string) string {
		return "réseau " + NetworkName(strings.TrimPrefix(m, "réseau "))
	})
}

var frenchMonths = [...]string{"janvier", "février", "mars", "avril", "mai", "juin", "juillet",
	"août", "septembre", "octobre", "novembre", "décembre"}

// paris is the shop's time zone (embedded by time/tzdata: no system
// zoneinfo needed).
var paris = func() *time.Location {
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		panic("domain: Europe/Paris: " + err.Error())
	}
	return loc
}()

// FrenchDate renders a time as people read dates on the site and the
// console: Paris time with UTC beside it, "3 décembre 2026 à 15:05
// (14:05 UTC)" (the site does not know the reader's time zone; the date is
// Paris's).
func FrenchDate(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	p, u := t.In(paris), t.UTC()
	return fmt.Sprintf("%d %s %d à %02d:%02d (%02d:%02d UTC)", p.Day(), frenchMonths[p.Month()-1], p.Year(),
		p.Hour(), p.Minute(), u.Hour(), u.Minute())
}

// dateInText is a date as stored texts write it: "03/12/2026 à 14:05 UTC"
// (workflows, payment requests) or "03/12/2026 14:05 UTC".
var dateInText = regexp.MustCompile(`\b([0-9]{2})/([0-9]{2})/([0-9]{4})(?: à)? ([0-9]{2}):([0-9]{2}) UTC\b`)

// FrenchDates rewrites the dates a stored text spells "03/12/2026 à 14:05
// UTC" with FrenchDate: one date style wherever people read them.
func FrenchDates(s string) string {
	if !strings.Contains(s, "/") {
		return s
	}
	return dateInText.ReplaceAllStringFunc(s, func(m string) string {
		t, err := time.Parse("02/01/2006 15:04 UTC", strings.Replace(m, " à ", " ", 1))
		if err != nil {
			return m
		}
		return FrenchDate(t)
	})
}

// Plural is n with its noun in French: singular for 0 and 1 ("1 minute",
// "0 minute"), plural beyond ("5 minutes").
func Plural(n int, one, many string) string {
	if n > 1 || n < -1 {
		return strconv.Itoa(n) + " " + many
	}
	return strconv.Itoa(n) + " " + one
}
