// Command bundle-validate checks OLM bundle directories the way
// `operator-sdk bundle validate DIR --select-optional suite=operatorframework` does, with the
// validators of the pinned operator-framework/api and operator-registry modules (operator-sdk
// itself is not available as a Go module here). It fails on any error and on any warning.
//
// Usage: bundle-validate [-k8s-version 1.30] DIR...
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apimanifests "github.com/operator-framework/api/pkg/manifests"
	apivalidation "github.com/operator-framework/api/pkg/validation"
	apierrors "github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
	registrybundle "github.com/operator-framework/operator-registry/pkg/lib/bundle"
	"github.com/sirupsen/logrus"
	k8svalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// optional is what operator-sdk's suite=operatorframework selects, with the deprecated
// "operatorhub" validator (whose every run warns that it is deprecated) replaced by the three
// validators its deprecation notice names.
var optional = interfaces.Validators{
	apivalidation.OperatorHubV2Validator,
	apivalidation.StandardCapabilitiesValidator,
	apivalidation.StandardCategoriesValidator,
	apivalidation.GoodPracticesValidator,
	apivalidation.AlphaDeprecatedAPIsValidator,
}

// validate returns the findings ("ERROR ..." or "WARNING ...") for one bundle directory.
func validate(dir, k8sVersion string) []string {
	var findings []string
	logger := logrus.NewEntry(logrus.New())
	logger.Logger.SetLevel(logrus.WarnLevel)
	validator := registrybundle.NewImageValidator(nil, logger)
	if err := validator.ValidateBundleFormat(dir); err != nil {
		findings = append(findings, "ERROR bundle format: "+err.Error())
	}
	manifests := filepath.Join(dir, "manifests")
	if err := validator.ValidateBundleContent(manifests); err != nil {
		findings = append(findings, "ERROR bundle content: "+err.Error())
	}
	bundle, err := apimanifests.GetBundleFromDir(manifests)
	if err != nil {
		return append(findings, "ERROR loading bundle: "+err.Error())
	}
	// The loader only reads annotations found under the directory it is given, so the
	// channel checks would see no channel at all (operator-sdk issue 5586); read them here.
	if err := addMetadata(bundle, filepath.Join(dir, "metadata", "annotations.yaml")); err != nil {
		return append(findings, "ERROR reading annotations: "+err.Error())
	}
	var results []apierrors.ManifestResult
	for _, obj := range bundle.Objects {
		kind := obj.GetKind()
		if kind == "ClusterServiceVersion" || kind == "CustomResourceDefinition" {
			continue
		}
		if ok, _ := registrybundle.IsSupported(kind); !ok {
			findings = append(findings, fmt.Sprintf("ERROR %s %s: kind not supported in registry+v1", kind, obj.GetName()))
		}
		noPrefix := func(string, bool) []string { return nil }
		for _, e := range k8svalidation.ValidateObjectMetaAccessor(obj, false, noPrefix, field.NewPath("metadata")) {
			findings = append(findings, fmt.Sprintf("ERROR %s %s: %s", kind, obj.GetName(), e))
		}
	}
	results = append(results, apivalidation.BundleValidator.Validate(bundle)...)
	if bundle.CSV == nil {
		return append(findings, "ERROR no ClusterServiceVersion in bundle")
	}
	results = append(results, apivalidation.ClusterServiceVersionValidator.Validate(bundle.CSV)...)
	var crds []interface{}
	for _, crd := range bundle.V1CRDs {
		crds = append(crds, crd)
	}
	results = append(results, apivalidation.CustomResourceDefinitionValidator.Validate(crds...)...)
	objs := bundle.ObjectsToValidate()
	for _, obj := range bundle.Objects {
		objs = append(objs, obj)
	}
	objs = append(objs, map[string]string{"k8s-version": k8sVersion})
	results = append(results, optional.Validate(objs...)...)
	for _, result := range results {
		for _, e := range result.Errors {
			findings = append(findings, "ERROR "+e.Error())
		}
		for _, w := range result.Warnings {
			findings = append(findings, "WARNING "+w.Error())
		}
	}
	return findings
}

// addMetadata sets the bundle's package and channels from its annotations file.
func addMetadata(bundle *apimanifests.Bundle, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var file apimanifests.AnnotationsFile
	if err := yaml.Unmarshal(raw, &file); err != nil {
		return err
	}
	bundle.Package = file.Annotations.PackageName
	bundle.Channels = strings.Split(file.Annotations.Channels, ",")
	bundle.DefaultChannel = file.Annotations.DefaultChannelName
	return nil
}

func main() {
	k8sVersion := flag.String("k8s-version", "", "Kubernetes version for the deprecated-API checks (e.g. 1.36)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: bundle-validate [-k8s-version X.Y] DIR...")
		os.Exit(2)
	}
	failed := false
	for _, dir := range flag.Args() {
		findings := validate(dir, *k8sVersion)
		for _, finding := range findings {
			fmt.Printf("%s: %s\n", dir, finding)
		}
		if len(findings) > 0 {
			failed = true
		} else {
			fmt.Printf("%s: no errors, no warnings\n", dir)
		}
	}
	if failed {
		os.Exit(1)
	}
}
