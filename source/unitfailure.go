package source

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"keyhole.dev/keyhole/diag"
)

// A deploy unit that does not build (kustomize) or render (Helm) fails in
// the engine too. That is keyhole's finding only when the unit holds
// something keyhole checks: one of its files names keyhole's kinds, or it
// may declare a Secret a Connection reads (docs/inputs.md, "Scope").
// Whether it may declare such a Secret is known only once every unit is
// read: a Connection's Secret that another unit holds is not this one's.
// So the failure of a unit none of whose files names keyhole's kinds is
// held (failedUnit) until the end of Load (settleFailures), and is then
// either its errors or one UnitNotBuilt warning naming the unit.

// CodeUnitNotBuilt is the warning said instead of a build's or render's
// errors when the unit holds nothing keyhole checks.
const CodeUnitNotBuilt = "UnitNotBuilt"

// unitFailure is a failed unit's errors, held until settleFailures.
type unitFailure struct {
	errs diag.List
	// note is said instead of errs when the unit holds nothing keyhole
	// checks.
	note diag.Diagnostic
	sc   unitSecrets
}

// failedUnit holds the diagnostics l.diags[d0:] of the unit u, which did
// not build or render, when none of its files names keyhole's kinds: what
// names the unit (an engine object, a chart) and why it is not read
// (kustomize's or Helm's own message) make the warning said instead when
// no Connection reads a Secret it may declare. It reports whether it
// held them.
func (l *loader) failedUnit(u *Unit, d0 int, pos diag.Pos, why string) bool {
	if d0 >= len(l.diags) {
		return false
	}
	var sc unitSecrets
	if u.Helm != nil {
		if l.chartNamesKeyhole(u.Root) {
			return false
		}
		sc.declares = l.chartHolds(u.Root, func(_ string, data []byte) bool { return declaresSecret(data) })
	} else {
		sc = l.secretsOf(u.Root)
		root := l.sourceRoot(u.Root)
		for _, c := range engineComponents(u) {
			dir := filepath.Join(u.Root, filepath.FromSlash(c))
			if c == "" || path.IsAbs(c) || strings.Contains(c, "://") || !within(root, dir) {
				continue
			}
			more := l.secretsOf(dir)
			sc.keyhole = sc.keyhole || more.keyhole
			sc.declares = sc.declares || more.declares
			sc.sure = sc.sure && more.sure
			sc.names = append(sc.names, more.names...)
		}
		if sc.keyhole {
			return false
		}
	}
	if !l.connections {
		sc.declares = false // nothing names keyhole's kinds: no Connection reads it
	}
	errs := append(diag.List(nil), l.diags[d0:]...)
	for i := range errs {
		errs[i].Units = []string{u.Name}
	}
	l.diags = l.diags[:d0]
	l.failures = append(l.failures, unitFailure{errs: errs, sc: sc, note: diag.Diagnostic{
		Code:     CodeUnitNotBuilt,
		Severity: diag.Warning,
		Pos:      pos,
		Units:    []string{u.Name},
		Message: fmt.Sprintf("%s is not read: %s; none of its files names keyhole's kinds, and no Connection reads a Secret it declares, so the engine's failure is not keyhole's to report, and nothing it deploys is checked",
			unitWhat(u), why),
	}})
	return true
}

// unitWhat names the unit u for a message: the engine object declaring
// it, or the directory built.
func unitWhat(u *Unit) string {
	name := u.Name
	if i := strings.IndexByte(name, ':'); i > 0 && u.Source != UnitKustomization {
		name = name[i+1:]
	}
	switch {
	case u.Flux != nil:
		return "Flux Kustomization " + name
	case u.Source == UnitHelmRelease:
		return "Flux HelmRelease " + name
	case u.Source == UnitArgoCD:
		return "Argo CD Application " + name
	case u.Helm != nil:
		return "Helm chart " + u.Name
	}
	return "kustomization " + u.Name
}

// settleFailures says, of each unit failedUnit held, its errors when it
// may declare a Secret a Connection reads that no unit read holds (a
// name that is part of the Secret's, or names it cannot tell), else its
// warning.
func (l *loader) settleFailures() {
	if len(l.failures) == 0 {
		return
	}
	missing := l.unheldSecrets()
	for _, f := range l.failures {
		if f.sc.declares && mayGive(f.sc, missing) {
			l.diags = append(l.diags, f.errs...)
			continue
		}
		l.diags = append(l.diags, f.note)
	}
	l.failures = nil
}

// mayGive reports whether a unit whose files say sc of Secrets may give
// one of the names in missing ("" for a name that cannot be told).
func mayGive(sc unitSecrets, missing map[string]bool) bool {
	if len(missing) == 0 {
		return false
	}
	if !sc.sure || len(sc.names) == 0 {
		return true
	}
	for m := range missing {
		if m == "" {
			return true
		}
		for _, n := range sc.names {
			if strings.Contains(m, n) {
				return true
			}
		}
	}
	return false
}

// unheldSecrets returns the names of the Secrets the Connections read
// that no document read declares (as a Secret or a stand-in of that
// name); "" stands for a name that is not plain (a Flux variable).
func (l *loader) unheldSecrets() map[string]bool {
	held := map[string]bool{}
	var conns []*Document
	for _, d := range l.docs {
		o := d.Object()
		switch {
		case isSecretKind(o.Kind):
			held[o.Name] = true
		case o.Kind == "Connection" && strings.HasPrefix(o.APIVersion, "omnia.altairalabs.ai/"):
			conns = append(conns, d)
		}
	}
	missing := map[string]bool{}
	for _, d := range conns {
		n, err := d.Tree()
		if err != nil {
			missing[""] = true
			continue
		}
		name := stringField(Lookup(Lookup(Lookup(n, "spec"), "credential"), "secretRef"), "name")
		switch {
		case strings.Contains(name, "${"):
			missing[""] = true
		case name != "" && !held[name]:
			missing[name] = true
		}
	}
	return missing
}
