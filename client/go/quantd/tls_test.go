package quantd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/quantd/quantd/client/go/gen/quantd/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// pki writes a CA, a server certificate for localhost and a client
// certificate (PEM) under dir.
func pki(t *testing.T, dir string) (ca *x509.CertPool, server tls.Certificate) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, kind string, der []byte) {
		data := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey := key()
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write("ca.pem", "CERTIFICATE", caDER)
	ca = x509.NewCertPool()
	ca.AddCert(caCert)
	for i, name := range []string{"server", "client"} {
		k := key()
		template := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			DNSNames:    []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, template, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		write(name+".pem", "CERTIFICATE", der)
		write(name+".key", "EC PRIVATE KEY", keyDER)
		if name == "server" {
			server = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
		}
	}
	return ca, server
}

func TestMutualTLSNeedsTheCAAndAClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, serverCert := pki(t, dir)
	lis := bufconn.Listen(1 << 20)
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert},
		ClientCAs:    ca,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	})
	server := grpc.NewServer(grpc.Creds(creds), grpc.CustomCodec(codec{}))
	pb.RegisterQuantizationServiceServer(server, &fakeService{getJob: func(_ context.Context, r *pb.GetJobRequest) (*pb.Job, error) {
		return &pb.Job{Name: r.Name, State: pb.JobState_QUEUED}, nil
	}})
	go server.Serve(lis)
	defer server.Stop()
	dialer := grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() })
	p := func(name string) string { return filepath.Join(dir, name) }
	mtls := TLSFiles{CAFile: p("ca.pem"), CertFile: p("client.pem"), KeyFile: p("client.key")}
	named := mtls
	named.ServerName = "localhost"
	wrongName := mtls
	wrongName.ServerName = "other.example"

	for _, tc := range []struct {
		name    string
		address string
		files   TLSFiles
		ok      bool
	}{
		{"mTLS", "localhost:50051", mtls, true},
		{"mTLS, server name given", "quantd.internal:50051", named, true},
		{"no client certificate", "localhost:50051", TLSFiles{CAFile: p("ca.pem")}, false},
		{"system roots", "localhost:50051", TLSFiles{CertFile: p("client.pem"), KeyFile: p("client.key")}, false},
		{"wrong server name", "localhost:50051", wrongName, false},
	} {
		c, err := Dial(context.Background(), tc.address, WithTLS(tc.files), WithToken("t"),
			WithUnavailableRetry(0), WithDialOptions(dialer))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		job, err := c.Get(ctx, "jobs/1")
		cancel()
		c.Close()
		if tc.ok && (err != nil || job.State != pb.JobState_QUEUED) {
			t.Errorf("%s: %v %v", tc.name, job, err)
		}
		if !tc.ok && status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want UNAVAILABLE", tc.name, err)
		}
	}
}
