// gitops-health reads objects as Flux judges them: kstatus's status.Compute (Flux's fork of
// sigs.k8s.io/cli-utils, the rules its health checks apply to custom resources) and, when a Flux
// Kustomization file is given, the healthCheckExprs it declares for the object's kind, evaluated by
// Flux's own CEL status evaluator (github.com/fluxcd/pkg/runtime/cel). Built by hack/build-tools.sh.
//
//	gitops-health [--kustomization FILE] OBJECTS.json
//
// OBJECTS.json is a JSON array of objects. One JSON line per object is printed:
// {"name": ..., "kstatus": "Current|InProgress|Failed|...", "message": ..., "cel": "..." (when
// the Kustomization has expressions for the kind; Unknown with "cel_error" when they fail)}.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

type kustomization struct {
	Kind string `json:"kind"`
	Spec struct {
		HealthCheckExprs []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Current    string `json:"current"`
			Failed     string `json:"failed"`
			InProgress string `json:"inProgress"`
		} `json:"healthCheckExprs"`
	} `json:"spec"`
}

// evaluators: "apiVersion/kind" -> Flux's evaluator for the Kustomization's expressions of that kind.
func evaluators(path string) (map[string]*cel.StatusEvaluator, error) {
	found := map[string]*cel.StatusEvaluator{}
	if path == "" {
		return found, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return found, nil
		}
		if err != nil {
			return nil, err
		}
		var k kustomization
		if err := yaml.Unmarshal(doc, &k); err != nil {
			return nil, err
		}
		if k.Kind != "Kustomization" {
			continue
		}
		for _, check := range k.Spec.HealthCheckExprs {
			exprs := kustomize.HealthCheckExpressions{
				Current: check.Current, Failed: check.Failed, InProgress: check.InProgress,
			}
			evaluator, err := cel.NewStatusEvaluator(&exprs)
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", check.APIVersion, check.Kind, err)
			}
			found[check.APIVersion+"/"+check.Kind] = evaluator
		}
	}
}

func main() {
	kustomizationFile := flag.String("kustomization", "", "a Flux Kustomization file whose healthCheckExprs to evaluate")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gitops-health [--kustomization FILE] OBJECTS.json")
		os.Exit(2)
	}
	byKind, err := evaluators(*kustomizationFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	data, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Integers as int64, as the API machinery decodes them (encoding/json would make them float64).
	var objects []map[string]any
	if err := utiljson.Unmarshal(data, &objects); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	for _, content := range objects {
		u := &unstructured.Unstructured{Object: content}
		result, err := status.Compute(u)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: kstatus: %v\n", u.GetName(), err)
			os.Exit(1)
		}
		line := map[string]string{"name": u.GetName(), "kstatus": string(result.Status), "message": result.Message}
		if evaluator, ok := byKind[u.GetAPIVersion()+"/"+u.GetKind()]; ok {
			celResult, err := evaluator.Evaluate(context.Background(), u)
			if err != nil {
				// What Flux's generic status reader makes of an evaluation error: Unknown (it keeps waiting).
				line["cel"], line["cel_error"] = string(status.UnknownStatus), err.Error()
			} else {
				line["cel"] = string(celResult.Status)
			}
		}
		if err := out.Encode(line); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
