package english

import "testing"

func TestCountNoun(t *testing.T) {
	for _, tc := range []struct {
		n    int
		noun string
		want string
	}{
		{0, "object", "0 objects"},
		{1, "object", "1 object"},
		{2, "field", "2 fields"},
		{200, "step", "200 steps"},
	} {
		if got := CountNoun(tc.n, tc.noun); got != tc.want {
			t.Errorf("CountNoun(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
	if IsAre(1) != "is" || IsAre(0) != "are" || IsAre(2) != "are" {
		t.Errorf("IsAre: %q %q %q", IsAre(0), IsAre(1), IsAre(2))
	}
}
