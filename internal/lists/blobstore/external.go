package blobstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// An external source is an object in a bucket the user owns, read with
// credentials the user supplies (a Secret in the list's namespace), never
// with the operator's own. Only S3 and S3-compatible stores are supported.

// ExternalURL is a parsed s3://bucket/key?region=&endpoint=&use_path_style= URL.
type ExternalURL struct {
	Bucket    string
	Key       string
	Region    string
	Endpoint  string
	PathStyle bool
}

// ExternalParams are the query parameters an external URL may carry.
var ExternalParams = []string{"region", "endpoint", "use_path_style"}

var (
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	regionName = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
)

// ParseExternalURL validates a user's blob URL for reading with their own
// credentials.
func ParseExternalURL(raw string) (ExternalURL, error) {
	var e ExternalURL
	u, err := url.Parse(raw)
	if err != nil {
		return e, errors.New("blobURL is not a URL")
	}
	if u.Scheme != "s3" {
		return e, fmt.Errorf("blobURL scheme %q cannot be read with credentialsSecretRef; use s3://bucket/key (S3 or an S3-compatible store)", truncateString(u.Scheme, 20))
	}
	if u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return e, errors.New("blobURL must be s3://bucket/key, without user info or fragment")
	}
	if !bucketName.MatchString(u.Host) || strings.Contains(u.Host, "..") {
		return e, fmt.Errorf("blobURL bucket %q is not a valid bucket name", truncateString(u.Host, 70))
	}
	e.Bucket = u.Host
	e.Key = strings.TrimPrefix(u.Path, "/")
	if err := CheckStrictKey(e.Key); err != nil {
		return e, fmt.Errorf("blobURL object: %w", err)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return e, errors.New("blobURL query is malformed")
	}
	for k, v := range q {
		if len(v) != 1 {
			return e, fmt.Errorf("blobURL parameter %q is given %d times", truncateString(k, 30), len(v))
		}
		switch k {
		case "region":
			if !regionName.MatchString(v[0]) {
				return e, fmt.Errorf("blobURL region %q is not a region name", truncateString(v[0], 40))
			}
			e.Region = v[0]
		case "endpoint":
			if e.Endpoint, err = checkEndpoint(v[0]); err != nil {
				return e, err
			}
			e.PathStyle = true
		case "use_path_style":
			b, err := strconv.ParseBool(v[0])
			if err != nil {
				return e, errors.New("blobURL use_path_style must be true or false")
			}
			e.PathStyle = b
		default:
			return e, fmt.Errorf("blobURL parameter %q is not supported; use %s", truncateString(k, 30), strings.Join(ExternalParams, ", "))
		}
	}
	return e, nil
}

func checkEndpoint(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("blobURL endpoint %q must be http(s)://host[:port]", truncateString(raw, 80))
	}
	return u.Scheme + "://" + u.Host, nil
}

// Credentials are S3 credentials from a user's Secret.
type Credentials struct {
	AccessKeyID, SecretAccessKey, SessionToken, Region string
}

// Secret keys of Credentials.
const (
	SecretAccessKeyID     = "AWS_ACCESS_KEY_ID"
	SecretSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	SecretSessionToken    = "AWS_SESSION_TOKEN"
	SecretRegion          = "AWS_REGION"
)

// CredentialsFromSecret reads a Secret's data.
func CredentialsFromSecret(data map[string][]byte) (Credentials, error) {
	c := Credentials{
		AccessKeyID:     strings.TrimSpace(string(data[SecretAccessKeyID])),
		SecretAccessKey: strings.TrimSpace(string(data[SecretSecretAccessKey])),
		SessionToken:    strings.TrimSpace(string(data[SecretSessionToken])),
		Region:          strings.TrimSpace(string(data[SecretRegion])),
	}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return c, fmt.Errorf("the Secret must hold %s and %s", SecretAccessKeyID, SecretSecretAccessKey)
	}
	return c, nil
}

// OpenExternal opens the user's bucket with their credentials. hc must be
// an SSRF-guarded client: the endpoint is the user's choice.
func OpenExternal(ctx context.Context, e ExternalURL, c Credentials, hc *http.Client) (*blob.Bucket, error) {
	region := e.Region
	if region == "" {
		region = c.Region
	}
	if region == "" {
		region = "us-east-1"
	}
	cfg := aws.Config{
		Region:                     region,
		Credentials:                credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken),
		HTTPClient:                 hc,
		RetryMaxAttempts:           2,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if e.Endpoint != "" {
			o.BaseEndpoint = aws.String(e.Endpoint)
		}
		o.UsePathStyle = e.PathStyle
	})
	return s3blob.OpenBucket(ctx, client, e.Bucket, &s3blob.Options{RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired})
}

func truncateString(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// IsAccessDenied reports whether a bucket refused the credentials: wrong
// key, wrong secret, expired token, or no permission on the object.
func IsAccessDenied(err error) bool {
	if gcerrors.Code(err) == gcerrors.PermissionDenied {
		return true
	}
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId", "ExpiredToken", "InvalidToken", "Forbidden":
			return true
		}
	}
	return false
}
