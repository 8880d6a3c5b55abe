package notify

import "github.com/kernodeck/kernodeck/postgres"

// accountSubjects are the subjects of the mails about the account itself
// (no order, no reference): its second factor turned on or off, its
// password changed.
var accountSubjects = map[string]string{
	postgres.MailTOTPEnabled:     "Double authentification activée sur votre compte Kernodeck",
	postgres.MailTOTPDisabled:    "Double authentification désactivée sur votre compte Kernodeck",
	postgres.MailPasswordChanged: "Mot de passe changé sur votre compte Kernodeck",
}

// accountView is what an account mail shows.
type accountView struct {
	FirstName string
	URL       string // the account page
}

// renderAccount renders account mail name, if it is one.
func (r *Renderer) renderAccount(name, firstName string) (Mail, bool, error) {
	subject, ok := accountSubjects[name]
	if !ok {
		return Mail{}, false, nil
	}
	m, err := r.execute(name, subject, accountView{FirstName: firstName, URL: r.BaseURL + "/compte"})
	return m, true, err
}
