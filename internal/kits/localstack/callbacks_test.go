package localstack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/operator"
)

// TestLocalCallbacksReachLoopback: under make run's options a callback is
// delivered to a receiver on this machine (and the API accepts its URL);
// under a cluster manager's defaults, or with no callback range (a
// Configuration's manager.callbackAllowCIDRs: []),
// the same delivery and URL are refused. (TestMakeRunE2E delivers one
// through the running stack.)
func TestLocalCallbacksReachLoopback(t *testing.T) {
	got := make(chan callback.Payload, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p callback.Payload
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &p)
		got <- p
	}))
	defer recv.Close()
	payload := callback.Payload{ListID: 7, Status: "Results", Name: "people.csv"}

	// deliver checks the URL as the API does at submission, and delivers
	// as the manager does: the answers of both.
	deliver := func(cidrs string) (validate, delivery error) {
		policy, err := callback.ParsePolicy(cidrs)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return policy.ValidateURL(recv.URL + "/cb"), callback.Deliver(ctx, policy.Client(5*time.Second), recv.URL+"/cb", payload)
	}

	s := &Stack{CallbackAllowCIDRs: Options{}.callbackCIDRs()}
	mo := s.managerOptions(Options{})
	if mo.CallbackAllowCIDRs != DefaultCallbackAllowCIDRs {
		t.Fatalf("make run's manager allows %q, want %q", mo.CallbackAllowCIDRs, DefaultCallbackAllowCIDRs)
	}
	if verr, err := deliver(mo.CallbackAllowCIDRs); verr != nil || err != nil {
		t.Fatalf("make run's options: callback_url check %v, delivery %v", verr, err)
	}
	select {
	case p := <-got:
		if p != payload {
			t.Errorf("received %+v, want %+v", p, payload)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loopback receiver got nothing")
	}

	var cluster operator.Options
	cluster.Defaults()
	for name, cidrs := range map[string]string{
		"a cluster manager's default":    cluster.CallbackAllowCIDRs,
		"make run with =none":            Options{CallbackAllowCIDRs: "none"}.callbackCIDRs(),
		"a cluster API's default (\"\")": "",
	} {
		verr, err := deliver(cidrs)
		var blocked *callback.BlockedError
		if verr == nil || !strings.Contains(verr.Error(), "must not point at") || !errors.As(err, &blocked) {
			t.Errorf("%s: callback_url check %v, delivery %v; want both refused", name, verr, err)
		}
	}
	select {
	case p := <-got:
		t.Errorf("a refused callback arrived: %+v", p)
	default:
	}
}
