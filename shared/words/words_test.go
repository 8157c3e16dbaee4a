package words

import "testing"

func TestCountSaysOneWithoutAnSAndEveryOtherNumberWithOne(t *testing.T) {
	for n, want := range map[int]string{0: "0 nodes", 1: "1 node", 2: "2 nodes", 11: "11 nodes", -1: "-1 nodes"} {
		if got := Count(n, "node"); got != want {
			t.Errorf("Count(%d, node) = %q, want %q", n, got, want)
		}
	}
}

func TestListSaysNoneForNothingAndJoinsTheRest(t *testing.T) {
	if got := List(nil); got != "none" {
		t.Errorf("List(nil) = %q, want none", got)
	}
	if got := List([]string{"dana", "olga"}); got != "dana,olga" {
		t.Errorf("List(dana, olga) = %q", got)
	}
}
