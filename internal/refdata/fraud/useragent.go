package fraud

import "strings"

// UA classes.
const (
	uaBrowser    = ""
	uaMissing    = "missing"
	uaHeadless   = "headless"
	uaAutomation = "automation"
	uaBot        = "bot"
)

// Lower-case markers. Order matters: automation before headless (a
// puppeteer UA usually says HeadlessChrome too), both before bot.
var (
	uaAutomationMarkers = []string{"selenium", "webdriver", "puppeteer", "playwright", "cypress", "chromedriver", "geckodriver", "nightmare", "splash"}
	uaHeadlessMarkers   = []string{"headlesschrome", "headless", "phantomjs", "slimerjs", "htmlunit", "electron/"}
	uaBotMarkers        = []string{
		"curl/", "wget/", "python-requests", "python-urllib", "python-httpx", "aiohttp", "httpx/",
		"go-http-client", "java/", "okhttp", "apache-httpclient", "libwww-perl", "lwp::", "ruby",
		"node-fetch", "axios/", "undici", "postmanruntime", "insomnia", "httpie", "scrapy",
		"bot/", "bot;", "bot)", "bot+", "bot.html", "crawler", "spider", "scraper", "httpclient", "guzzlehttp", "php/",
	}
)

// classifyUA returns the class of a user agent string.
func classifyUA(ua string) string {
	ua = strings.ToLower(strings.TrimSpace(ua))
	if ua == "" {
		return uaMissing
	}
	for _, m := range uaAutomationMarkers {
		if strings.Contains(ua, m) {
			return uaAutomation
		}
	}
	for _, m := range uaHeadlessMarkers {
		if strings.Contains(ua, m) {
			return uaHeadless
		}
	}
	for _, m := range uaBotMarkers {
		if strings.Contains(ua, m) {
			return uaBot
		}
	}
	// A real browser announces itself as Mozilla/5.0 (or Opera); anything
	// else is a library or a script.
	if !strings.HasPrefix(ua, "mozilla/") && !strings.HasPrefix(ua, "opera/") {
		return uaBot
	}
	return uaBrowser
}

func (a *assessor) userAgentSignals(ua string) {
	switch classifyUA(ua) {
	case uaMissing:
		a.add(ReasonUAMissing)
	case uaHeadless:
		a.add(ReasonUAHeadless)
	case uaAutomation:
		a.add(ReasonUAAutomation)
	case uaBot:
		a.add(ReasonUABot)
	}
}
