package controllers_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/listid"
)

// localIDs is the counter of the local manager, whose API namespace is
// nsLocal and which also watches the user namespaces team-a and team-b.
func localIDs() *listid.Allocator {
	return &listid.Allocator{Reader: k8s, Writer: k8s, Namespace: nsLocal, Name: listid.DefaultConfigMap}
}

// idList builds a small list in ns with the list-id label v (none when
// v is "") and the given extra labels; its source is a ConfigMap of ns.
func idList(t *testing.T, ns, name, v string, labels ...string) *listsv1.EmailList {
	t.Helper()
	createConfigMap(t, ns, name+"-src", "list.csv", "a@example.com\n")
	b := builders.MakeEmailList(ns, name).ConfigMap(name+"-src", "list.csv").Labels(labels...)
	if v != "" {
		b = b.Labels(listsv1.ListIDLabel, v)
	}
	l := b.Obj()
	create(t, l)
	return l
}

// restList creates a list as the REST API does: an ID reserved for its
// name, then the list in the API namespace with the label and managed-by.
func restList(t *testing.T) (*listsv1.EmailList, int64) {
	t.Helper()
	prefix := uniqueName("rest")
	id, err := localIDs().Reserve(context.Background(), func(id int64) string { return fmt.Sprintf("%s-%d", prefix, id) })
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s-%d", prefix, id)
	return idList(t, nsLocal, name, strconv.FormatInt(id, 10), listsv1.LabelManagedBy, listsv1.ManagedByAPI, listsv1.LabelTenant, testTenant), id
}

// assignedID waits until the list has an ID.
func assignedID(t *testing.T, l *listsv1.EmailList) int64 {
	t.Helper()
	var id int64
	eventually(t, 20*time.Second, "list "+l.Name+" to get an ID", func() (bool, string) {
		id = getList(t, l.Namespace, l.Name).Status.ListID
		return id != 0, ""
	})
	return id
}

func counterLast(t *testing.T) int64 {
	t.Helper()
	var cm corev1.ConfigMap
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: nsLocal, Name: listid.DefaultConfigMap}, &cm); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(cm.Data["last"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// localListIDs maps every list ID of the local manager's namespaces to
// the lists holding it.
func localListIDs(t *testing.T) map[int64][]string {
	t.Helper()
	out := map[int64][]string{}
	for _, ns := range []string{nsLocal, nsTeamA, nsTeamB} {
		var ls listsv1.EmailListList
		if err := k8s.List(context.Background(), &ls, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, l := range ls.Items {
			if l.Status.ListID != 0 {
				out[l.Status.ListID] = append(out[l.Status.ListID], ns+"/"+l.Name)
			}
		}
	}
	return out
}

func noSharedIDs(t *testing.T) {
	t.Helper()
	for id, holders := range localListIDs(t) {
		if len(holders) > 1 {
			t.Errorf("list ID %d is shared by %v", id, holders)
		}
	}
}

func labelIgnored(t *testing.T, l *listsv1.EmailList) {
	t.Helper()
	eventually(t, 10*time.Second, "a "+controllers.ReasonListIDLabelIgnored+" event on "+l.Name, func() (bool, string) {
		evs := warningEvents(t, l.Namespace, l.Name)
		for _, e := range evs {
			if strings.HasPrefix(e, controllers.ReasonListIDLabelIgnored+": ") && strings.Contains(e, listsv1.ListIDLabel) {
				return true, ""
			}
		}
		return false, strings.Join(evs, "; ")
	})
}

// TestListIDLabels (F2): only the operator assigns list IDs. The label is
// honoured for a list the REST API created (its namespace, its managed-by
// label, and an ID the counter reserved for that list by name), once; any
// other label (a taken ID, one ahead of the counter, the counter's next
// value, not a number; in a user namespace, with a forged managed-by
// label, or in the API namespace without a reservation) is ignored with a
// Warning event, and no two lists share an ID.
func TestListIDLabels(t *testing.T) {
	rest, taken := restList(t)
	if got := assignedID(t, rest); got != taken {
		t.Fatalf("the REST API's list got ID %d, want the reserved %d", got, taken)
	}
	eventually(t, 10*time.Second, "the reservation to be released", func() (bool, string) {
		_, ok, err := localIDs().Reserved(context.Background(), taken)
		return err == nil && !ok, fmt.Sprint(err)
	})
	if evs := warningEvents(t, nsLocal, rest.Name); len(evs) != 0 {
		t.Errorf("warnings on the REST API's list: %v", evs)
	}

	// A reservation for some other list name.
	other, err := localIDs().Reserve(context.Background(), func(id int64) string { return fmt.Sprintf("someone-else-%d", id) })
	if err != nil {
		t.Fatal(err)
	}
	forged := []string{listsv1.LabelManagedBy, listsv1.ManagedByAPI, listsv1.LabelTenant, testTenant}
	for _, tc := range []struct {
		name   string
		ns     string
		label  func() string
		labels []string
	}{
		{"taken id in a user namespace", nsTeamA, func() string { return fmt.Sprint(taken) }, nil},
		{"future id in a user namespace", nsTeamA, func() string { return fmt.Sprint(counterLast(t) + 1000) }, nil},
		{"the counter's next value in a user namespace", nsTeamA, func() string { return fmt.Sprint(counterLast(t) + 1) }, nil},
		{"not a number", nsTeamA, func() string { return "abc" }, nil},
		{"zero", nsTeamB, func() string { return "0" }, nil},
		{"taken id with a forged managed-by label in a user namespace", nsTeamA, func() string { return fmt.Sprint(taken) }, forged},
		{"future id with a forged managed-by label in a user namespace", nsTeamB, func() string { return fmt.Sprint(counterLast(t) + 7) }, forged},
		{"taken id in the API namespace, not reserved", nsLocal, func() string { return fmt.Sprint(taken) }, forged},
		{"future id in the API namespace", nsLocal, func() string { return fmt.Sprint(counterLast(t) + 5) }, forged},
		{"an id reserved for another list, in the API namespace", nsLocal, func() string { return fmt.Sprint(other) }, forged},
		{"the API namespace without managed-by", nsLocal, func() string { return fmt.Sprint(other) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.label()
			lastBefore := counterLast(t)
			l := idList(t, tc.ns, uniqueName("forged"), v, tc.labels...)
			id := assignedID(t, l)
			labelIgnored(t, l)
			if want, err := strconv.ParseInt(v, 10, 64); err == nil && want > lastBefore+1 || v == fmt.Sprint(taken) || v == fmt.Sprint(other) {
				if fmt.Sprint(id) == v {
					t.Errorf("the list took the ID of its label %s", v)
				}
			}
			if id <= lastBefore {
				t.Errorf("ID %d is not from the counter (at %d before)", id, lastBefore)
			}
			// A future label moved nothing: the counter hands out on from where it was.
			if next := counterLast(t); next > lastBefore+5 {
				t.Errorf("the counter jumped from %d to %d", lastBefore, next)
			}
			noSharedIDs(t)
		})
	}
	// The reservation of the other name still stands; the list it names
	// gets its ID even after a forger tried it.
	named := idList(t, nsLocal, fmt.Sprintf("someone-else-%d", other), fmt.Sprint(other), forged...)
	if got := assignedID(t, named); got != other {
		t.Errorf("the list the reservation names got %d, want %d", got, other)
	}

	// Once: the REST list deleted and made again under its name, with its
	// label, does not get the ID again; not even when the release after
	// its adoption failed (a reservation naming it is left, written here
	// by hand): the deletion drops it.
	// The controllers write the same ConfigMap (other lists' IDs), so the
	// write retries on a conflict as any writer of it must.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: nsLocal, Name: listid.DefaultConfigMap}, &cm); err != nil {
			return err
		}
		cm.Data[fmt.Sprintf("reserved.%d", taken)] = rest.Name + " " + time.Now().UTC().Format(time.RFC3339)
		return k8s.Update(context.Background(), &cm)
	}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(context.Background(), rest); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the REST list to go", func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(rest), &listsv1.EmailList{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if _, ok, err := localIDs().Reserved(context.Background(), taken); ok || err != nil {
		t.Errorf("the reservation of deleted list %d is still there (%v)", taken, err)
	}
	again := rest.DeepCopy()
	again.ObjectMeta = metav1.ObjectMeta{Namespace: rest.Namespace, Name: rest.Name, Labels: rest.Labels}
	again.Status = listsv1.EmailListStatus{}
	create(t, again)
	if got := assignedID(t, again); got == taken {
		t.Errorf("a list made again under the name of list %d took its ID", taken)
	}
	labelIgnored(t, again)
	noSharedIDs(t)
}

// TestListIDLabelRace: REST lists whose IDs forgers label their own lists
// with at the same moment (in a user namespace, and in the API namespace
// with the managed-by label) each get their reserved ID; the forgers get
// other IDs, and no ID is shared.
func TestListIDLabelRace(t *testing.T) {
	const n = 4
	ctx := context.Background()
	type reserved struct {
		id   int64
		name string
	}
	var rs []reserved
	for range n {
		prefix := uniqueName("race")
		id, err := localIDs().Reserve(ctx, func(id int64) string { return fmt.Sprintf("%s-%d", prefix, id) })
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, reserved{id, fmt.Sprintf("%s-%d", prefix, id)})
	}
	forged := []string{listsv1.LabelManagedBy, listsv1.ManagedByAPI, listsv1.LabelTenant, testTenant}
	var mu sync.Mutex
	var legit, forgers []*listsv1.EmailList
	var wg sync.WaitGroup
	for _, r := range rs {
		v := fmt.Sprint(r.id)
		for _, mk := range []func() *listsv1.EmailList{
			func() *listsv1.EmailList { return idList(t, nsLocal, r.name, v, forged...) },
			func() *listsv1.EmailList { return idList(t, nsTeamA, uniqueName("race-user"), v) },
			func() *listsv1.EmailList { return idList(t, nsLocal, uniqueName("race-api"), v, forged...) },
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := mk()
				mu.Lock()
				defer mu.Unlock()
				if l.Name == r.name {
					legit = append(legit, l)
				} else {
					forgers = append(forgers, l)
				}
			}()
		}
	}
	wg.Wait()
	for i, l := range legit {
		want := fmt.Sprint(l.Labels[listsv1.ListIDLabel])
		if got := assignedID(t, l); fmt.Sprint(got) != want {
			t.Errorf("REST list %d (%s) got ID %d, want its reserved %s", i, l.Name, got, want)
		}
	}
	for _, l := range forgers {
		if got := assignedID(t, l); fmt.Sprint(got) == l.Labels[listsv1.ListIDLabel] {
			t.Errorf("forged list %s/%s took ID %d", l.Namespace, l.Name, got)
		}
	}
	noSharedIDs(t)
}

// TestListIDReservations: the counter's reservations. Reserve and Next
// share one dense sequence under contention; Release drops a reservation
// only for the name it holds, and with it the stale ones.
func TestListIDReservations(t *testing.T) {
	ctx := context.Background()
	a := &listid.Allocator{Reader: k8s, Writer: k8s, Namespace: nsSystem, Name: "reservations-test"}
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				var id int64
				var err error
				if w%2 == 0 {
					id, err = a.Reserve(ctx, func(id int64) string { return fmt.Sprintf("l-%d", id) })
				} else {
					id, err = a.Next(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("id %d handed out twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for id := int64(1); id <= 40; id++ {
		if !seen[id] {
			t.Errorf("id %d skipped", id)
		}
	}
	rs, err := a.Reservations(ctx)
	if err != nil || len(rs) != 20 {
		t.Fatalf("%d reservations (%v), want 20", len(rs), err)
	}
	r0 := rs[0]
	if got, ok, _ := a.Reserved(ctx, r0.ID); !ok || got.Name != fmt.Sprintf("l-%d", r0.ID) || time.Since(got.At) > time.Minute {
		t.Errorf("Reserved(%d) = %+v %v", r0.ID, got, ok)
	}
	// Another name does not release it.
	if err := a.Release(ctx, r0.ID, "not-the-list", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.Reserved(ctx, r0.ID); !ok {
		t.Error("released by another name")
	}
	// Its own name does, and stale ones go with it.
	staleID := rs[1].ID
	if err := a.Release(ctx, r0.ID, r0.Name, func(r listid.Reservation) bool { return r.ID == staleID }); err != nil {
		t.Fatal(err)
	}
	rs2, _ := a.Reservations(ctx)
	if len(rs2) != 18 {
		t.Errorf("%d reservations after releasing one and a stale one, want 18", len(rs2))
	}
	for _, r := range rs2 {
		if r.ID == r0.ID || r.ID == staleID {
			t.Errorf("reservation %d still there", r.ID)
		}
	}
}
