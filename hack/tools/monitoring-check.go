// monitoring-check decodes ServiceMonitor, PodMonitor and PrometheusRule documents strictly into
// the Prometheus Operator's own API types: a misspelt or mistyped field is an error, as it would be
// a silently ignored setting in a cluster. Other kinds are skipped. Built by hack/build-tools.sh.
//
//	monitoring-check FILE...   (multi-document YAML; exit 1 on the first bad document per file)
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func target(kind string) any {
	switch kind {
	case monitoringv1.ServiceMonitorsKind:
		return &monitoringv1.ServiceMonitor{}
	case monitoringv1.PodMonitorsKind:
		return &monitoringv1.PodMonitor{}
	case monitoringv1.PrometheusRuleKind:
		return &monitoringv1.PrometheusRule{}
	}
	return nil
}

func check(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	checked := 0
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return checked, nil
		}
		if err != nil {
			return checked, err
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return checked, err
		}
		into := target(meta.Kind)
		if into == nil {
			continue
		}
		if meta.APIVersion != monitoringv1.SchemeGroupVersion.String() {
			return checked, fmt.Errorf("%s %s: apiVersion %q, want %q", meta.Kind, meta.Metadata.Name, meta.APIVersion, monitoringv1.SchemeGroupVersion)
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			return checked, fmt.Errorf("%s %s: %w", meta.Kind, meta.Metadata.Name, err)
		}
		checked++
	}
}

func main() {
	failed := false
	for _, path := range os.Args[1:] {
		checked, err := check(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
			continue
		}
		fmt.Printf("%s: %d monitoring objects ok\n", path, checked)
	}
	if failed {
		os.Exit(1)
	}
}
