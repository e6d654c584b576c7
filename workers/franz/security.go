package main

// TLS and SASL: the security settings of the worker contract (docs/drivers.md,
// "Security"), the canonical names of ktrial's clusters/security.py. They act
// together (a mechanism needs its login, a certificate its key), so they are read
// as one group before the per-name settings. No error message carries a secret.

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

var securityKeys = map[string]bool{
	"security.protocol":                     true,
	"sasl.mechanism":                        true,
	"sasl.username":                         true,
	"sasl.password":                         true,
	"ssl.ca.location":                       true,
	"ssl.certificate.location":              true,
	"ssl.key.location":                      true,
	"ssl.key.password":                      true,
	"ssl.endpoint.identification.algorithm": true,
}

func securityString(s map[string]any, k string) string {
	if v, ok := s[k]; ok && v != nil {
		return fmt.Sprint(v)
	}
	return ""
}

// securityOptions: the client options of the security settings in s.
func securityOptions(s map[string]any) ([]kgo.Opt, error) {
	get := func(k string) string { return securityString(s, k) }
	proto := get("security.protocol")
	if proto == "" {
		proto = "PLAINTEXT"
	}
	var useTLS, useSASL bool
	switch proto {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return nil, fmt.Errorf("security.protocol=%s: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", proto)
	}
	var opts []kgo.Opt
	if useSASL {
		var m sasl.Mechanism
		user, pass := get("sasl.username"), get("sasl.password")
		switch get("sasl.mechanism") {
		case "PLAIN":
			m = plain.Auth{User: user, Pass: pass}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
		default:
			return nil, fmt.Errorf("sasl.mechanism=%s: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", get("sasl.mechanism"))
		}
		opts = append(opts, kgo.SASL(m))
	}
	if useTLS {
		cfg, err := tlsConfig(get)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	return opts, nil
}

func tlsConfig(get func(string) string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := get("ssl.ca.location"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("ssl.ca.location: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ssl.ca.location=%s: no PEM certificate in it", ca)
		}
		cfg.RootCAs = pool
	}
	if cert := get("ssl.certificate.location"); cert != "" {
		if get("ssl.key.password") != "" {
			return nil, fmt.Errorf("ssl.key.password: the franz worker reads unencrypted PEM keys only")
		}
		pair, err := tls.LoadX509KeyPair(cert, get("ssl.key.location"))
		if err != nil {
			return nil, fmt.Errorf("ssl.certificate.location / ssl.key.location: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	switch get("ssl.endpoint.identification.algorithm") {
	case "", "https":
		// franz-go sets ServerName to each broker's host: the name is checked.
	case "none":
		// The chain is still verified against the CAs; only the host name is not.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("the broker sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	default:
		return nil, fmt.Errorf("ssl.endpoint.identification.algorithm: want https or none")
	}
	return cfg, nil
}
