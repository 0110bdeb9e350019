package restapi_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/dom"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// focused describes the element with the keyboard focus, and whether its
// focus is visible: an outline of at least 2 px on it (on its label's
// button for the visually hidden file input) with a box on the screen.
const focusedJS = `(() => {
	const e = document.activeElement;
	const shown = e.id === 'file' ? document.querySelector('label[for=file]') : e;
	const cs = getComputedStyle(shown), r = shown.getBoundingClientRect();
	const what = e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.type === 'radio' ? '[' + e.value + ']' : '') +
		(e.dataset.column ? '[column ' + e.dataset.column + ']' : '') +
		(e.tagName === 'BUTTON' || e.tagName === 'A' ? ' "' + e.textContent.trim().slice(0, 40) + '"' : '');
	return {What: what, Visible: cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2 && r.width > 0 && r.height > 0};
})()`

type focus struct {
	What    string
	Visible bool
}

// tabTo presses Tab until the element matching sel has the focus (at most
// max presses), failing on a focus it cannot see; it returns what the
// focus went through.
func (p *page) tabTo(sel string, max int) []string {
	p.t.Helper()
	var path []string
	for range max {
		p.run(chromedp.KeyEvent(kb.Tab))
		f := eval[focus](p, focusedJS)
		path = append(path, f.What)
		if !f.Visible {
			p.shot("invisible-focus")
			p.t.Errorf("the focus on %s is not visible", f.What)
		}
		if eval[bool](p, fmt.Sprintf("document.activeElement.matches(%q)", sel)) {
			return path
		}
	}
	p.shot("tab-lost")
	p.t.Fatalf("%d Tabs did not reach %s; the focus went %s", max, sel, strings.Join(path, " → "))
	return nil
}

// press sends keys to the focused element.
func (p *page) press(keys string) { p.t.Helper(); p.run(chromedp.KeyEvent(keys)) }

// TestConsoleByKeyboard goes through the console with the keyboard only:
// sign-in, a file chosen (the file chooser the keyboard opens is answered
// as the system's dialog would), the email column picked in the preview,
// the upload, the list opened from the lists, the report bought through
// its confirmation and the result downloaded. Each Tab lands on a visible
// focus, in the page's order; axe checks the result view.
func TestConsoleByKeyboard(t *testing.T) {
	chromium, axePath := browserKit(t)
	axeSrc, err := os.ReadFile(axePath)
	if err != nil {
		t.Fatal(err)
	}
	sample, err := filepath.Abs(filepath.Join("..", "..", "config", "samples", "sample-list.csv"))
	if err != nil {
		t.Fatal(err)
	}
	p := newPage(t, chromium)
	p.axeSrc = string(axeSrc)
	p.run(chromedp.Navigate(baseURL + "/console/"))
	p.wait("the sign-in form", `document.getElementById('key')`, 10*time.Second)
	p.run(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, cdppage.SetInterceptFileChooserDialog, cdppage.SetInterceptFileChooserDialogParams{Enabled: true})
		return err
	}))

	// Sign in: the skip link first, then the key.
	order := p.tabTo("#key", 3)
	if !strings.HasPrefix(order[0], `a "Skip to content"`) {
		t.Errorf("the first Tab lands on %s; want the skip link", order[0])
	}
	p.press(keyReporter + "\r")
	p.wait("signed in", `!document.getElementById('app').hidden`, 10*time.Second)
	p.shot("kb-signed-in")

	// Upload: the file input (Space opens the chooser), the column, the
	// action, the button; in the page's order.
	path := p.tabTo("#file", 6)
	p.press(" ")
	select {
	case node := <-p.choosers:
		p.run(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, dom.SetFileInputFiles, dom.SetFileInputFilesParams{Files: []string{sample}, BackendNodeID: node})
			return err
		}))
	case <-time.After(10 * time.Second):
		p.shot("no-chooser")
		t.Fatal("Space on the file input opened no file chooser")
	}
	p.wait("the preview", `document.querySelector('#preview-table thead button')`, 10*time.Second)
	path = append(path, p.tabTo(`#preview-table [data-column="0"]`, 5)...)
	p.press(kb.ArrowRight) // not a way through columns: Tab is
	path = append(path, p.tabTo(`#preview-table [data-column="3"]`, 5)...)
	p.press("\r")
	p.wait("column 4 chosen by Enter", `document.querySelector('#preview-table [data-column="3"]').getAttribute('aria-pressed') === 'true'`, 5*time.Second)
	if got := eval[string](p, `document.activeElement.dataset.column`); got != "3" {
		t.Errorf("after choosing column 4 the focus is on column %q; want it kept", got)
	}
	path = append(path, p.tabTo(`input[name=action]`, 8)...)
	p.press(kb.ArrowDown) // the radio group: arrows choose
	if v := eval[string](p, `document.querySelector('input[name=action]:checked').value`); v != "report" {
		t.Fatalf("ArrowDown in the action group chose %q; want report", v)
	}
	path = append(path, p.tabTo("#upload-btn", 4)...)
	t.Logf("Tab order through the upload: %s", strings.Join(path, " → "))
	inOrder(t, path, "input#file", "select#delimiter", "input#header", "button[column 0]", "button[column 3]", "select#service", "input[process]", "input#callback", `button#upload-btn`)
	p.shot("kb-upload-ready")
	p.press("\r")
	p.wait("the upload's answer", `document.getElementById('upload-msg').textContent.startsWith('Uploaded')`, 30*time.Second)
	var id int64
	if _, err := fmt.Sscanf(p.text("#upload-msg"), "Uploaded: list %d", &id); err != nil {
		t.Fatal(p.text("#upload-msg"))
	}

	// Lists: the list's Open button, once its report is ready.
	p.wait("the report", fmt.Sprintf(`document.querySelector('#lists-table tr[data-list-id="%d"] [data-status="Processed"]')`, id), 60*time.Second)
	p.tabTo(fmt.Sprintf(`#lists-table tr[data-list-id="%d"] button`, id), 30)
	p.press("\r")
	p.wait("the result view, focused", `document.getElementById('detail-body').dataset.status === 'Processed' && document.activeElement.id === 'detail-h'`, 15*time.Second)
	p.shot("kb-result")
	p.axe(p.axeSrc, "result view (keyboard)")

	// Buy: the button, the confirmation (Tab stays in the dialog), then
	// the download.
	p.tabTo("#buy", 40)
	p.press("\r")
	p.wait("the confirmation", `document.getElementById('confirm').open`, 5*time.Second)
	p.tabTo("#confirm-buy", 3)
	p.shot("kb-confirm")
	p.press("\r")
	p.wait("bought", `document.getElementById('download') && document.getElementById('detail-body').dataset.status === 'Results'`, 30*time.Second)
	p.tabTo("#download", 40)
	p.press("\r")
	select {
	case guid := <-p.downloads:
		got, err := os.ReadFile(filepath.Join(p.shots, guid))
		if err != nil {
			t.Fatal(err)
		}
		if want := restResults(t, keyReporter, id); string(got) != string(want) {
			t.Errorf("the keyboard's download (%d bytes) differs from the REST download (%d bytes)", len(got), len(want))
		}
	case <-time.After(30 * time.Second):
		p.shot("no-download")
		t.Fatal("Enter on the download button downloaded nothing")
	}
	p.shot("kb-downloaded")
}

// inOrder asserts that the focus path visits each of want (a prefix of a
// step's description) in that order.
func inOrder(t *testing.T, path []string, want ...string) {
	t.Helper()
	i := 0
	for _, step := range path {
		if i < len(want) && strings.HasPrefix(step, want[i]) {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("the focus went %s; want %s in that order (missed %s)", strings.Join(path, " → "), strings.Join(want, ", "), want[i])
	}
}
