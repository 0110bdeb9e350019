package fraud

import (
	"context"
	"testing"
)

func TestClassifyUA(t *testing.T) {
	tests := []struct{ ua, want string }{
		{"", uaMissing},
		{"   ", uaMissing},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", uaBrowser},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", uaBrowser},
		{"Mozilla/5.0 (Linux; Android 9; CUBOT X19) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36", uaBrowser},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.0.0 Safari/537.36", uaHeadless},
		{"Mozilla/5.0 (Unknown; Linux x86_64) AppleWebKit/538.1 (KHTML, like Gecko) PhantomJS/2.1.1 Safari/538.1", uaHeadless},
		{"Mozilla/5.0 (Windows NT 10.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36 Selenium", uaAutomation},
		{"Mozilla/5.0 HeadlessChrome/121.0 Puppeteer", uaAutomation},
		{"Mozilla/5.0 (X11; Linux x86_64) Playwright/1.43", uaAutomation},
		{"curl/8.5.0", uaBot},
		{"python-requests/2.31.0", uaBot},
		{"Go-http-client/1.1", uaBot},
		{"Wget/1.21.4", uaBot},
		{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", uaBot},
		{"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", uaBot},
		{"okhttp/4.12.0", uaBot},
		{"MyScript 1.0", uaBot},
	}
	for _, tc := range tests {
		if got := classifyUA(tc.ua); got != tc.want {
			t.Errorf("classifyUA(%q) = %q, want %q", tc.ua, got, tc.want)
		}
	}
}

func TestUserAgentSignals(t *testing.T) {
	s := New(DefaultConfig(), Deps{})
	tests := []struct {
		ua   string
		want string
	}{
		{"", ReasonUAMissing},
		{"Mozilla/5.0 HeadlessChrome/124.0", ReasonUAHeadless},
		{"Mozilla/5.0 selenium webdriver", ReasonUAAutomation},
		{"curl/8.5.0", ReasonUABot},
	}
	for _, tc := range tests {
		a := s.Assess(context.Background(), testTenant, Input{Email: "ann@gmail.com", UserAgent: tc.ua}, okResult("ann@gmail.com"))
		checkCodes(t, a, []string{tc.want}, nil)
	}
	a := s.Assess(context.Background(), testTenant, Input{Email: "ann@gmail.com", UserAgent: "Mozilla/5.0 (Macintosh) Safari/605.1"}, okResult("ann@gmail.com"))
	checkCodes(t, a, nil, []string{ReasonUAMissing, ReasonUAHeadless, ReasonUAAutomation, ReasonUABot})
}
